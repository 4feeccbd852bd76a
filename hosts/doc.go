// Package hosts is politeness towards the sites being rendered, and its one owner: how a host's
// answers change how many of its renders may be in flight on the node, and when it may be
// rendered again. It answers the two questions every other package asks of a host: may it take
// one more render now (Admit, for claim's takes), and how many entries may it hold in the ready
// set (Allowance.EntryCap, for the sweep). Both derive from Allow, the one function that
// computes a host's allowance; the views for people (Rows: /v1/queue, freshqctl top, the host
// metrics) read it too.
//
// The answers are applied where they bind: Admit takes a render slot of the host, a host token
// of the segment's lease table (tokens.go: at most a host's limit of tokens are held at once,
// across all processes; ReleaseEarlierIncarnations gives back those of a render worker killed
// mid-render); Shaper shapes the sweep's ready set (shape.go: a paused host has no entry, a
// host at most its share). Package shm only stores the host table (shm/hosttable), the farm
// words (Membership) and the tokens' leases; the one choice made there is which host's state a
// full window of the table gives up, under its writer's lock (see "What it does not promise").
//
// Step is the state machine, a pure function of (a host's state, one result, the
// configuration, now). Tracker runs it in worker 0 for every result whose lease held (local
// render workers' and remote renderers'; a fenced result changes nothing, host state included,
// as anyone can post one naming any host) and
// writes the outcome to the shared host table (shm.Hosts), which every render worker reads at
// each take. Tracker is that table's one writer.
//
// Invariants:
//   - A host not in the table is at its defaults: not paused, its configured maximum in flight
//     (render.hosts.max_concurrency or its override). Step returns keep=false exactly when the
//     state it reached is that (no pause ahead, the limit at the maximum, no error streak). The
//     table holds only hosts paused or throttled; a host that differs from its defaults by an
//     error streak alone is kept in the Tracker's memory.
//   - A refusal (Refusal: a 429, or a 503 with a valid Retry-After) pauses the host for the
//     delay it asks, at least MinPause and at most render.hosts.max_pause; a pause is never
//     shortened by a later answer, and a success does not end it early. A 429 without a
//     Retry-After pauses for MinPause and halves the limit: the origin said "too many" without
//     saying for how long, so the farm sends fewer.
//   - AIMD: render.hosts.halve_after consecutive 5xx or timeouts halve the host's limit (never
//     below 1); render.hosts.grow_after consecutive successes raise it by one; it never exceeds
//     the configured maximum, and at the maximum the host leaves the table.
//   - A refusal is not a failure of the page: package intake leaves its row exactly as it was.
//   - A host's limit is computed in Allow alone; no other package reads the host table's limit
//     or pause to decide anything.
//
// On a cluster the nodes are one farm to a site (farm.go, farmnode.go): a host's limit is the
// cluster's, node i of n holds ⌊L/n⌋ of it plus one of the L mod n that rotate with the round,
// a share grows only a grace after a change (a render's timeout, a tick and a second), and a
// refusal's pause is shared with every node through the PauseBoard the engine keeps
// (Tracker.Adopt takes the other nodes' pauses).
//
// What it does not promise: the table has a bounded number of slots (shm.Hosts); when one is
// full, a host's state may be evicted, which returns that host to its defaults early. A paused
// host is evicted only for a host paused until later, never for one merely throttled or paused
// no longer; when none can make room, the newcomer's state is the one not kept (logged).
package hosts
