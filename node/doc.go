// Package node assembles a worker process of freshq as an ordered list of services: New takes
// the worker's settings (who it is, the configuration in force) and its dependencies (its
// share of the shared-memory segment, the log, the clock, and the store engine and cluster
// services that the binary provides as functions) and returns a Node whose services start in
// the list's order and stop in the reverse order (internal/startstop's StartAll and StopAll).
//
// Worker 0 (the store worker) is the store, the cluster membership and the hosts' farm, the
// store's GC, the render-on-miss watch, the sitemap runs, the crawler listener (serve.listen),
// the control socket, the capacity recounts, the reschedule and the sweep loop (sweeploop). A
// render worker is its render pool (renderloop).
//
// Invariants:
//   - Nothing is opened, listened on or started before Start; worker 0's parts are built by its
//     first service, once the store is open.
//   - The list read backwards is the stop order. Where a part's stop must come elsewhere than
//     its start's mirror (the membership hands its shards over right after the sweep loop
//     stops; the store closes last), it is a start-only and a stop-only entry (startstop.Func).
//   - A Start that fails stops what it started; Stop without Start is a no-op, Stop twice is
//     safe, and Start after Stop fails (ErrStopped).
//   - Worker 0 never closes its store under a live writer: past the stop's bounds, it leaves the
//     store open (it recovers at the next open) rather than closing it (workerStop).
//   - This package names no store engine: it sees a store.Store.
//
// Package node assembles, so it reads the configuration (package config) like the binaries;
// the settings narrowing it reads through is assemble/settings, kept apart so that the
// simulator and the services' tests can narrow a configuration without importing the services.
package node
