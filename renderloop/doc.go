// Package renderloop is a render worker's engine: render.concurrency loops that claim a job
// from the shared-memory ready set (or worker 0's index, one claim at a time), render it
// (conditionally when worker 0 allows a check of an unchanged page), and hand the result to
// the delivery, which sends results to worker 0 in batches with a few batches in flight.
//
// Its inputs are all in Deps: the segment and this worker's block, the settings in force (read
// once per render or claim, so that a reload applies to the next one), and the functions that
// build a renderer and a conditional checker from the render settings in force (the binary's,
// which narrow the configuration; this package does not read it).
//
// Invariants:
//   - A claimed job's lease is never silently dropped: it ends with a result delivered to
//     worker 0, or it is given back (released with no grace and counted in
//     shm.CounterReleasedUnrendered or shm.CounterResultsDropped).
//   - A job's host slot is released as soon as its render ends, before its delivery.
//   - A stop takes at most shutdown_timeout + renderFlushTimeout, whatever worker 0 does.
//   - The renderer and the checker are rebuilt only when a reload changed the render settings.
package renderloop
