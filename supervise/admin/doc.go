// Package admin is the supervisor's admin listener (listen): /metrics, /healthz and /readyz
// answered by the supervisor itself, from shared memory and worker 0's status, so they work
// while worker 0 restarts; the console at /ui/ and GET /v1/series (package ui); everything else
// proxied to worker 0 over its control socket.
//
// # Invariants
//
//   - In front of every request, in this order: the Host check (hostGuard, against DNS
//     rebinding), the cross-origin check on writes (crossOrigin), the bearer token (authorize)
//     and the bulk endpoints' deadlines (bulkDeadlines). /healthz and /readyz pass the Host
//     check and the token, so a load balancer's probe gets its answer.
//   - Worker 0's /internal/ endpoints are never proxied (internalGuard); once the pool stops,
//     remote claims are refused with 503 while the calls that end leases still pass.
//   - Every connection is bounded: http.max_conns at once, http.max_unauthenticated per peer
//     before its requests pass authorize (connguard), and each one in time (HTTPServer).
//   - The listener's stop is a drain (Stop): the socket may outlive this supervisor, so every
//     request it accepted is answered; requests waiting for a render on miss end first
//     (EndWaits).
//   - The settings are read at each request (Options.Settings): a reload applies at once.
//
// Everything it needs is passed in (Options): the settings in force, worker 0's socket and
// status, the pool's stop, the collector of shared memory's series and the console.
package admin
