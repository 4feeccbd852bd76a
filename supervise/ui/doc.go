// Package ui wires the operator console (package console) into the supervisor: the console at
// /ui/, reading the operator API over worker 0's control socket, and the series its overview
// charts (GET /v1/series), one sample a minute of the renders per second, backlog and stale
// share (worker 0's GET /v1/queue) and the lateness of the minute's grants (the
// freshq_lateness_ratio histograms in the segment).
//
// # Invariants
//
//   - A sample is taken at the first look in each minute of the clock (clock.Now, which tests
//     move); a minute in which worker 0 does not answer is sampled from shared memory only.
//   - The sampler only reads the segment, and returns once the pool's stop began.
//   - The console's sessions are keyed on the admin token in force, read at each request: a
//     reload that changes the token ends them.
//
// Everything it needs is passed in (Options): the token in force, worker 0's socket, the
// segment, the pool's stop and a logger.
package ui
