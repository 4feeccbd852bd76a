// Package shmmetrics is the Prometheus collector of the supervisor's /metrics: at each scrape it
// turns the shared-memory segment's counters (every worker's block, the ready buffer, the lease
// table, the claim floor and the host table) into the series docs/METRICS.md lists, and adds
// the figures only worker 0 knows (its capacity view, and its cluster view on PostgreSQL), read
// over its control socket at the scrape.
//
// # Invariants
//
//   - A scrape writes nothing to shared memory: it only loads counters, so it works while worker
//     0 restarts, and a scrape cannot disturb a claim.
//   - The counters summed across workers are summed over the Workers blocks the segment was
//     created with; gauges of one worker (backlog, floor, sweep) are worker 0's block.
//   - A figure read from worker 0 that does not answer within its bound is left out of that
//     scrape (a missing series is honest, a stale one is not); the shared memory's series stay.
//   - Per-host series are bounded: at most HostSeriesMax hosts each, from the host table only.
//
// # What it needs
//
// New takes everything explicitly (Options): the segment, the number of worker blocks, whether
// the node is in a cluster (store.backend postgres), the host limits in force (they change on a
// reload) and worker 0's views (a *wire.Client does). It refuses a missing one.
package shmmetrics
