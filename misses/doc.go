// Package misses is render on miss: a page that a crawler (the crawler listener) or an operator
// (POST /v1/pages?wait=) asks for and that has no servable page is rendered once for every
// request that waits for it (Flights), and HostRate is the per-site token bucket that bounds the
// new targets such requests create.
//
// Invariants (Flights' doc says how each is kept):
//   - One rush per flight, and one flight per key at a time.
//   - Bounded: flights, waiters and one site's share of the waiters are capped by Settings;
//     past a cap a request is refused at once (intake.ErrOverloaded), never queued.
//   - Nobody waits past the stop: Stop wakes every flight with intake.ErrStopping.
//   - A flight lives only while somebody waits on it.
//   - Only pages of the hosts render.domains names are rendered on miss, a new target takes a
//     token of its site's rate first, and a known page whose renders are failing is not rushed
//     while its backoff runs (intake.ErrBackingOff): a refusal files nothing.
//
// It reads only its own Settings (render.domains, the caps, serve.miss_rate and
// serve.miss_burst, page.max_wait), narrowed where the node is assembled (assemble/node); what
// it files, rushes and reads goes through the targets service (intake.Targets), and the
// Applier wakes its flights (apply.MissWaker).
package misses
