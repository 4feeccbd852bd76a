// Package sim is freshq's deterministic discrete-event simulator of the queue under scarcity,
// and the scheduling-quality report it produces (docs/SIMULATION.md, `make sim`).
//
// # What is simulated
//
// One node, on a virtual clock in int64 milliseconds. Nothing sleeps and nothing reads the wall
// clock for a decision: time moves only in the event loop, from one event to the next.
//
//	corpus (Generate)                      events, in this order at equal times
//	────────────────                       ─────────────────────────────────────
//	keys, classes, sources,                1. render completions  policy.Apply → DueSet.WriteSchedule,
//	ladder rungs, due times,                                      lease released
//	last renders, fates                    2. window opening      (once: who is due, for starvation)
//	       │                               3. sweep tick          sweep.Sweeper.Sweep over the DueSet:
//	       ▼                                                      score, select (policy.Selector in the
//	  DueSet ◀──────── writes ─────────┐                          scenario's Mode), publish to shm
//	(the d/ index,                     │   4. claim tick          claim.Claimer.Claim: take from the shm
//	 in memory)                        │                          ready set and lease, else the floored
//	       │ passes, scans             │                          index scan (claim.IndexSource)
//	       ▼                           │   5. sample tick         standing lag, charts
//	production sweep/claim ──▶ renders ┘
//
// What is production's and what is the simulator's:
//
//   - Production's, driven as is: the sweep (sweep.Sweeper with Options.Mode set per policy:
//     policy.ModeEDF, ModeScore, ModeLanes, ModeStrict), cadence resolution, scoring, lanes and
//     top-K selection (policy), the ready buffer, leases and floor cell (shm, in an in-memory
//     segment), the claim path and its fallback (claim.Claimer, claim.IndexSource), and what a
//     render's outcome does to its row (policy.Apply: cadence counted from completion, the
//     demand ladder, backoff, sealing by strikes).
//   - The simulator's: the due set (DueSet, an in-memory d/ index with the store's contract:
//     sweep.Store, sweep.Pass, claim.Scanner), the corpus (Generate, from a Mix), the render
//     farm (capacity in renders per hour, paced exactly; the share of its slots it spends on
//     work no cadence asks for; a latency and an outcome drawn per attempt), the visits that
//     move pages on the ladder, and the measurements.
//
// # Why the corpus and the farm are what they are
//
// The default mix (default-mix.yaml) is derived from the only measurements of the production
// queue there are, production's table of age at render ÷ TTL (Production). Each of its rows is a
// balance of the farm's slots — a class rendered at a mean age of r cadences takes 1/r of its
// demand — and ProductionFit solves four of them for the classes' shares of the demand and
// the share of the farm that refreshed no scheduled page (about a tenth, at both capacities).
// That tenth is what keeps index order saturated, and so late, at 100 %: cadence counts from
// completion, so a farm that spends every slot on the cadences drains any lag and idles. The
// report (Report.Model) states the derivation with its numbers.
//
// # Hosts
//
// Every key has a host (cachekey.Host of "device|https://host/path"), the unit render.hosts
// limits: the corpus's sites, sN.test (Mix.Sites). A run measures each host as it measures a
// class — mean and p95 of age at render ÷ TTL, renders, due rows — and the most renders of its
// pages in flight at one instant, counted by the farm itself (up when it starts a render, down
// when the render completes), not read back from the host tokens it is checking.
//
// BigHost is the politeness scenario: the corpus runs once as it is, then again with one more
// host whose pages are sized to hold a given share of all due rows (all overdue at the start)
// and which render.hosts.overrides holds to a few renders in flight. The second run's farm is
// the first's plus what the big host's slots can render (its limit ÷ the mean latency), so
// every other host is offered at least what it had; it must then be rendered as late as
// without the big host (within Tolerance), and the big host never above its limit.
//
// # Ground truth: requests served stale
//
// With Options.Fresh, a run also has ground truth (truth.go, freshness.go): every page a hidden
// change process (never, Poisson at a heavy-tailed rate, or daily bursts) and a request rate
// (Zipf over a random ranking, independent of change), drawn from their own streams so every
// policy meets the same changes. The run measures the share of requests served stale (the page
// changed since its last successful render) beside age ÷ cadence. A scenario's Score then
// replaces policy.Score through policy.Policy.WithScorer, on the same sweep and selection:
// ScoreFreshness ranks by freshness.Score from what the run learned online from its own renders
// and the simulated requests, ScoreOracle by lateness against freshness.Optimal's rates for the
// true ones, each ranking a row as past its ceiling from one sweep interval before it
// (freshness.Bounds.LeadMs). The scored runs read the whole due set at every sweep: the class
// merge bounds a class by relative lateness, which does not bound a freshness score.
// DueFreshness is production's queue.policy freshness instead, with no scorer (freshdue.go):
// due times and rank intervals filed as the Applier files them (freshness.DueAfter,
// freshness.RankInterval, freshness.RetryRank), the threshold and ceilings tuned as worker 0
// tunes them (capacity.TuneFreshness, from a capacity.Meter the run's completions feed), the
// sweep's ranking by lateness ÷ rank interval and its class merge.
// RunFreshness and RunFreshnessMixes are the comparison `make sim-freshness` writes
// (sim/freshreport), its runs sharing one pool of workers; FreshSection is its section of
// docs/SIMULATION.md, which `make sim` writes after the scheduling report. That report's
// tables (TestTableGolden) run without ground truth and are unchanged by it.
//
// # Invariants
//
//   - Deterministic: a Result is a pure function of (corpus, options, scenario), and a corpus of
//     (mix, keys, seed, start, configuration). Every random decision is a hash of the seed, a
//     stream, the page and the attempt number, so the n-th attempt of a page turns out the same
//     under every policy (policies are compared on the same luck) and no decision depends on
//     event order or on how many scenarios run at once. Same seed and scenarios: byte-identical
//     table; testdata/table-small.txt holds the table of a small run as the reference
//     (TestTableGolden; regenerate it with -rewrite after a deliberate change).
//   - The order is production's: the DueSet orders rows by (dueAt, key) as Badger orders the d/
//     index, and every ranking decision is made by the production code above.
//   - F1 holds: a write lowers the floor to its due time before the row is visible; a pass
//     advances it only by compare-and-swap from the floor it read, to at most min(first due
//     observed, its now, any write made while it was open) − guard. The run checks after every
//     sweep that no row lies below the floor, and fails if one does.
//   - Capacity is exact: every claim tick offers the renders the capacity allows since the last
//     one (integer micro-renders, no drift), gives the mix's unscheduled share of them to work
//     outside the corpus (split the same way: the same slots under every policy), and asks the
//     queue for the rest; a slot that finds nothing to claim is idle and lost. Granted + idle +
//     unscheduled = offered, so no policy can do more work than another: a policy changes who is
//     rendered, never how many.
//   - Time moves forward only: every event is at or after the current time, and a render
//     completes strictly after it starts.
//
// # Limits
//
// One node; no worker crashes (a lease always ends in its result, never by expiry); no
// operator rushes; the corpus is fixed during a run; a visit's probability does not grow with
// a page's lateness; the unscheduled work is modelled by its size only — a share of every
// claim's slots, never queued, so no policy orders it. The report repeats these.
package sim
