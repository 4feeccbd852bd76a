package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// The cluster end to end: three real freshq nodes on loopback, one PostgreSQL
// database. Each test states what it proves and how it could fail; ownership is read from
// freshq_shard_lease, grants from the grant log (e2e_cluster_grantlog_test.go), and the rows
// below their shard's floor from the tables themselves, never from a node's own report alone.

const clusterSweep = time.Second // queue.ready.sweep_interval of every cluster test

// clusterYAML is every node's queue, render and supervisor configuration: a short sweep, the
// sim renderer at latency, few render slots (the machine has two cores for three nodes and
// the database), and every render slot free to the corpus's one host (politeness is not what
// the cluster tests test). A render's timeout of 2 s keeps the grace a node that joins the
// others waits before it renders a host short (3.5 s, docs/CLUSTER.md); settle waits it out.
func clusterYAML(latency string) string {
	return fmt.Sprintf(`queue: {ready: {sweep_interval: %s}}
render: {renderer: sim, concurrency: 4, timeout: 2s, sim: {latency_median: %s}, hosts: {max_concurrency: 1024}}
supervisor: {shutdown_timeout: 2s}
`, clusterSweep, latency)
}

var clusterIDs = []string{"node-a", "node-b", "node-c"}

// The production failure: a write lowered the floor of the node that executed it, not of the
// row's owner, so a row filed more than the guard in the past through another node landed
// below its owner's floor and was never rendered. Here writes through node A for keys whose
// shards B and C own, due guard + 2 min in the past, are granted on their owners within a few
// sweeps, and no row is ever below its floor.
func TestClusterWritesThroughAnyNodeReachTheirOwner(t *testing.T) {
	writesThroughA(t, false)
}

// The same writes with the floor lowered on the writer (FRESHQ_TEST_FLOOR_ON_WRITER, the
// production bug) strand every row below its owner's floor, and no sweep grants one: the test
// above can fail.
func TestClusterWriterFloorSwitchStrandsRows(t *testing.T) {
	writesThroughA(t, true)
}

func writesThroughA(t *testing.T, floorOnWriter bool) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	opts := clusterOptions{nodes: 3, workers: 2, leaseTTL: 2 * time.Second, yaml: clusterYAML("5ms")}
	if floorOnWriter {
		opts.env = []string{envFloorOnWriter + "=1"}
	}
	c := newCluster(t, opts)
	c.settle(clusterIDs...)
	a := c.nodes[0]

	// Every floor is past the due time the writes carry (an empty shard's floor is now − guard
	// after its owner's first advance): a write that lowered another shard's floor would
	// leave its row below its own.
	guard := time.Duration(config.GuardDefault)
	due := time.Now().Add(-guard - 2*time.Minute).Truncate(time.Second)
	waitFor(t, "every shard's floor past the writes' due time", 30*time.Second, func() bool { return c.floorsAbove(due.UnixMilli()) })

	before := c.leases()
	owner := map[int]string{}
	for _, l := range before {
		owner[l.shard] = l.owner
	}
	const perNode = 40
	want := map[string]string{} // key → the node that owns its shard
	var items []wire.TargetItem
	count := map[string]int{}
	for i := 0; len(items) < 2*perNode; i++ {
		url := fmt.Sprintf("https://shop.test/c/elsewhere-%05d", i)
		key, shard := targetKey(t, url)
		o := owner[shard]
		if (o != "node-b" && o != "node-c") || count[o] == perNode {
			continue
		}
		count[o]++
		want[key] = o
		items = append(items, wire.TargetItem{URL: url, Source: "api", Due: due.UTC().Format(time.RFC3339)})
	}
	sweepsOf := func(n *clusterNode) float64 { return n.metric(`freshq_ready_sweeps_total{outcome="ok"}`) }
	sweepsB, sweepsC := sweepsOf(c.nodes[1]), sweepsOf(c.nodes[2])
	posted := time.Now()
	acked, err := a.postTargets(items)
	if err != nil || !acked {
		t.Fatalf("POST through node-a: acked %v, %v", acked, err)
	}
	// The write lowered its rows' own floors in its transaction, or (the switch) node A's.
	below := c.rowsBelowFloor()
	t.Logf("%d rows written through node-a for node-b (%d) and node-c (%d), due %s: %d below their floor",
		len(items), count["node-b"], count["node-c"], due.Format(time.RFC3339), below)

	grantedOn := func() map[string]string {
		got := map[string]string{}
		for _, ev := range c.grants() {
			if _, ok := want[ev.key]; ok && ev.kind == "grant" {
				if _, seen := got[ev.key]; !seen {
					got[ev.key] = ev.node
				}
			}
		}
		return got
	}
	if floorOnWriter {
		if below != len(items) {
			t.Fatalf("%d of %d rows below their floor with the floor lowered on the writer", below, len(items))
		}
		// More sweeps on each owner than the fixed test's bound allows (4 sweep intervals), and
		// not one of the rows granted: they are stranded.
		waitFor(t, "five more sweeps on node-b and node-c", 30*clusterSweep, func() bool {
			return sweepsOf(c.nodes[1]) >= sweepsB+5 && sweepsOf(c.nodes[2]) >= sweepsC+5
		})
		if got := grantedOn(); len(got) != 0 {
			t.Fatalf("%d stranded rows were granted anyway: %v", len(got), got)
		}
		if below := c.rowsBelowFloor(); below != len(items) {
			t.Fatalf("%d rows below their floor after the sweeps, want all %d", below, len(items))
		}
		t.Logf("all %d rows still below their owners' floors after %v and five sweeps on each owner", len(items), time.Since(posted).Round(time.Millisecond))
		return
	}
	if below != 0 {
		t.Fatalf("%d rows below their floor right after the write", below)
	}
	// A sweep runs every clusterSweep on each owner; the bound allows the sweep after the
	// write's, the one after that, and a loaded machine's take.
	waitFor(t, "every row granted", 4*clusterSweep, func() bool { return len(grantedOn()) == len(want) })
	took := time.Since(posted)
	for key, node := range grantedOn() {
		if node != want[key] {
			t.Fatalf("%s granted on %s, its shard's owner is %s", key, node, want[key])
		}
	}
	if after := c.leases(); !slices.Equal(before, after) {
		t.Fatalf("ownership moved during the test: %v → %v", before, after)
	}
	t.Logf("every row granted on its owner %v after the write (sweep interval %v)", took.Round(time.Millisecond), clusterSweep)
	if below := c.rowsBelowFloor(); below != 0 {
		t.Fatalf("%d rows below their floor", below)
	}
	c.checkGrants()
}

// loadWriter posts batches of new targets in order, each to the next node that is up, and
// again to another when a node cannot take it; acked counts the batches every item of which
// was accepted.
type loadWriter struct {
	c       *testCluster
	prefix  string
	batch   int
	batches int                  // 0: until stopped
	ahead   int                  // 0: no limit; else it waits while more acknowledged targets than this have no page
	shards  func(shard int) bool // nil: every shard; else only keys of the shards it keeps
	down    []atomic.Bool
	acked   atomic.Int64
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	keys    []string
}

func startLoad(c *testCluster, prefix string, batch, batches, ahead int) *loadWriter {
	w := &loadWriter{c: c, prefix: prefix, batch: batch, batches: batches, ahead: ahead, down: make([]atomic.Bool, len(c.nodes)),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *loadWriter) run() {
	defer close(w.done)
	next := 0
	for b := 0; w.batches == 0 || b < w.batches; b++ {
		for w.ahead > 0 && w.pages() < int(w.acked.Load())*w.batch-w.ahead {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond): // polls the database, as waitFor does
			}
		}
		items := make([]wire.TargetItem, 0, w.batch)
		keys := make([]string, 0, w.batch)
		for i := 0; len(items) < w.batch; i++ {
			url := fmt.Sprintf("https://shop.test/c/%s-%04d-%05d", w.prefix, b, i)
			key, shard := targetKey(w.c.t, url)
			if w.shards != nil && !w.shards(shard) {
				continue
			}
			items, keys = append(items, wire.TargetItem{URL: url, Source: "sitemap"}), append(keys, key)
		}
		for acked := false; !acked; {
			select {
			case <-w.stop:
				return
			default:
			}
			next = (next + 1) % len(w.c.nodes)
			if w.down[next].Load() {
				continue
			}
			acked, _ = w.c.nodes[next].postTargets(items)
		}
		w.mu.Lock()
		w.keys = append(w.keys, keys...)
		w.mu.Unlock()
		w.acked.Add(1)
	}
}

// pages counts the pages in the database (0 when it cannot).
func (w *loadWriter) pages() int {
	var n int
	w.c.db.QueryRow(context.Background(), "SELECT count(*) FROM freshq_page").Scan(&n)
	return n
}

// finish stops the writer (when it runs until stopped) and returns the acknowledged keys.
func (w *loadWriter) finish() []string {
	if w.batches == 0 {
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keys
}

func (c *testCluster) renderedTotal() float64 {
	total := 0.0
	for _, n := range c.nodes {
		total += n.rendered() // 0 for a node that is down
	}
	return total
}

// waitRendered waits until every key has its page.
func (c *testCluster) waitRendered(keys []string, limit time.Duration) {
	c.t.Helper()
	start := time.Now()
	waitFor(c.t, fmt.Sprintf("all %d targets rendered", len(keys)), limit, func() bool {
		_, _, pages := c.missing(keys)
		return pages == 0
	})
	c.t.Logf("all %d targets rendered %v later", len(keys), time.Since(start).Round(time.Millisecond))
	rows, targets, _ := c.missing(keys)
	if rows != 0 || targets != 0 {
		c.t.Fatalf("acknowledged targets missing: %d schedule rows, %d targets", rows, targets)
	}
}

// waitMoved waits until none of shards is held by from, each by a live lease of another node,
// and returns how long that took since t0.
func (c *testCluster) waitMoved(from string, shards map[int]int64, t0 time.Time, limit time.Duration) time.Duration {
	c.t.Helper()
	waitFor(c.t, fmt.Sprintf("%s's %d shards owned by live nodes", from, len(shards)), limit-time.Since(t0), func() bool {
		own := c.owners()
		for s := range shards {
			if o := own[s]; o == "" || o == from {
				return false
			}
		}
		return true
	})
	return time.Since(t0)
}

// Failover: 20,000 targets posted across three nodes; node C is killed (kill -9 of its
// supervisor and every worker) while they render. Its shards are owned by live nodes within
// the lease TTL plus slack, every acknowledged target is present and rendered, no row is
// below its floor, and no shard was granted by two nodes at once.
func TestClusterFailoverKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	const ttl = 2 * time.Second
	c := newCluster(t, clusterOptions{nodes: 3, workers: 3, leaseTTL: ttl, yaml: clusterYAML("2ms")})
	c.settle(clusterIDs...)
	victim := c.nodes[2]

	w := startLoad(c, "failover", 1000, 20, 0)
	waitFor(t, "8 batches acknowledged and renders under way", 60*time.Second, func() bool {
		return w.acked.Load() >= 8 && c.renderedTotal() >= 1000
	})
	lost := c.shardsOf(victim.id)
	t0 := time.Now()
	victim.kill9()
	w.down[2].Store(true)
	// A live node notices an expired lease at its next renew (every ttl/4) after the TTL has
	// run from the victim's last renew; the slack is that renew period and a second for a
	// loaded machine.
	took := c.waitMoved(victim.id, lost, t0, ttl+ttl/4+time.Second)
	t.Logf("node-c killed with %d batches acknowledged and %v rendered; its %d shards owned by live nodes %v later (lease TTL %v)",
		w.acked.Load(), c.renderedTotal(), len(lost), took.Round(time.Millisecond), ttl)

	keys := w.finish()
	if len(keys) != 20_000 {
		t.Fatalf("%d targets acknowledged, want 20000", len(keys))
	}
	c.waitRendered(keys, 150*time.Second)
	if below := c.rowsBelowFloor(); below != 0 {
		t.Fatalf("%d rows below their floor", below)
	}
	c.checkGrants()
}

// Pause: node C is stopped (SIGSTOP of all its processes) past its lease TTL with published
// rows in its segment; once its shards are owned by the others it is continued. From then on
// it grants no row of a shard it lost (the grant log), its render workers' takes of the rows
// it had published are refused by the fence (CounterGrantsFenced, freshq_grants_fenced_total),
// and it advances no floor of a lost shard: the database's own record of every floor advance
// (a trigger) has none by node C of a shard another node held. Its refused advances
// (CounterAdvancesFenced) are reported: whether it tries one depends on whether its sweep or
// its lease tick runs first after the pause.
func TestClusterPausedNodeGrantsNothingItLost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	const ttl = 2 * time.Second
	// 100 ms renders: the backlog outlasts the test, so node C's segment holds published
	// rows when it stops.
	c := newCluster(t, clusterOptions{nodes: 3, workers: 3, leaseTTL: ttl, yaml: clusterYAML("100ms")})
	c.settle(clusterIDs...)
	victim := c.nodes[2]
	c.auditFloorAdvances()
	// Rows in the even shards only: node C's odd shards stay empty, and an empty shard's floor
	// follows the clock (now − guard), so an advance of one by node C after it lost it would
	// raise it, and show in the audit.
	w := &loadWriter{c: c, prefix: "pause", batch: 1000, batches: 3, down: make([]atomic.Bool, len(c.nodes)),
		stop: make(chan struct{}), done: make(chan struct{}), shards: func(s int) bool { return s%2 == 0 }}
	go w.run()
	w.finish()
	waitFor(t, "node-c rendering", 30*time.Second, func() bool { return victim.rendered() >= 20 })

	// The counters are read from node C's segment: it stays readable while the node is stopped.
	seg := victim.segment()
	fencedGrants := func() uint64 {
		total := uint64(0)
		for i := range 3 {
			w, _ := seg.Worker(i)
			total += w.Load(shm.CounterGrantsFenced)
		}
		return total
	}
	fencedAdvances := func() uint64 {
		w0, _ := seg.Worker(0)
		return w0.Load(shm.CounterAdvancesFenced)
	}
	// The fence is exercised only if node C's segment holds published rows nobody has taken
	// when it stops: pause it while its ready set has some left (its render workers drain a
	// set in seconds, a sweep refills it each second), and again if it ran dry meanwhile.
	untaken := func() uint64 {
		st := seg.Ready().Stats()
		return st.Count - st.Taken
	}
	for attempt := 1; ; attempt++ {
		waitFor(t, "node-c's ready set holding rows", 30*time.Second, func() bool { return untaken() >= 16 })
		victim.pause()
		if untaken() > 0 {
			break
		}
		if attempt == 5 {
			t.Fatalf("node-c's ready set ran dry at each of %d pauses", attempt)
		}
		victim.resume()
	}
	grants0, advances0 := fencedGrants(), fencedAdvances()
	lost := c.shardsOf(victim.id)
	t0 := time.Now()
	took := c.waitMoved(victim.id, lost, t0, ttl+ttl/4+3*time.Second)
	t.Logf("node-c stopped with %d rows published; its %d shards owned by the others %v later (lease TTL %v)",
		untaken(), len(lost), took.Round(time.Millisecond), ttl)
	resumed := time.Now().UnixNano()
	w0, _ := seg.Worker(0)
	// Its render workers run again first, as the scheduler may have them do after a whole-node
	// SIGCONT; worker 0 follows once they have met the fence (or after 10 s, and the check
	// below fails).
	victim.resumeRenderWorkersFirst(w0.Status().PID, func() bool { return fencedGrants() > grants0 }, 10*time.Second)

	// Node C's worker 0 finds each lease gone (a lost line for every shard), and sweeps again.
	waitFor(t, "node-c back, each lost shard noticed", 30*time.Second, func() bool {
		if !victim.ready() {
			return false
		}
		seen := map[int]bool{}
		for _, ev := range c.grants() {
			if ev.node == victim.id && (ev.kind == "lost" || ev.kind == "release") && ev.ns > resumed-int64(ttl) && lost[ev.shard] == ev.epoch {
				seen[ev.shard] = true
			}
		}
		return len(seen) == len(lost)
	})
	sweeps0 := victim.metric(`freshq_ready_sweeps_total{outcome="ok"}`)
	waitFor(t, "two sweeps of node-c after it resumed", 30*clusterSweep, func() bool {
		return victim.metric(`freshq_ready_sweeps_total{outcome="ok"}`) >= sweeps0+2
	})

	// Both checks of the grant log, reported together: the grants node C made of shards it
	// had lost, and what the general check ("no shard granted by two nodes at once") says.
	evs := c.grants()
	stale, bad := staleGrants(evs, victim.id, resumed, lost), checkGrantLog(evs)
	if len(stale) > 0 || len(bad) > 0 {
		t.Fatalf("node-c granted %d rows of shards it had lost after it resumed, the first: %v; %d grant-log violations, the first: %q",
			len(stale), stale[:min(3, len(stale))], len(bad), bad[:min(3, len(bad))])
	}
	if stale := staleAdvances(c.floorAdvances(), c.grants(), victim.id, resumed, lost); len(stale) > 0 {
		t.Fatalf("node-c advanced the floor of shards it had lost %d times after it resumed, the first: %+v", len(stale), stale[0])
	}
	grants1, advances1 := fencedGrants(), fencedAdvances()
	t.Logf("node-c after it resumed: %v takes refused by the fence, %v floor advances refused", grants1-grants0, advances1-advances0)
	if grants1 <= grants0 {
		t.Fatalf("node-c's CounterGrantsFenced %v → %v: its render workers took nothing the fence refused, so the test did not exercise the fence", grants0, grants1)
	}
	if below := c.rowsBelowFloor(); below != 0 {
		t.Fatalf("%d rows below their floor", below)
	}
	c.checkGrants()
}

// Rolling restart under load: each node in turn gets SIGTERM, exits, and is started again,
// while a writer keeps posting new targets through the nodes that are up. With a 30 s lease
// TTL, each stop hands its shards over at once (they are owned by the others within a third
// of the TTL, not after it); afterwards every acknowledged target is in the database and
// rendered, no row is below its floor, and no shard was granted by two nodes at once.
func TestClusterRollingRestartHandsOver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	const ttl = 30 * time.Second
	// The bound on a stop's handover: the others look for shards without an owner at each
	// renew (every ttl/4), and a loaded machine gets slack; a handover that waited for the
	// TTL would take 30 s at least.
	const handover = ttl / 3
	c := newCluster(t, clusterOptions{nodes: 3, workers: 2, leaseTTL: ttl, yaml: clusterYAML("5ms")})
	waitFor(t, "the shards spread over the nodes", 60*time.Second, func() bool { return c.spread(clusterIDs...) })
	// The writer keeps at most 2,000 targets unrendered: load, not a backlog to drain.
	w := startLoad(c, "rolling", 200, 0, 2000)
	waitFor(t, "load under way", 30*time.Second, func() bool { return w.acked.Load() >= 3 && c.renderedTotal() >= 300 })

	for i, n := range c.nodes {
		mine := c.shardsOf(n.id)
		w.down[i].Store(true)
		t0 := time.Now()
		n.cmd.Process.Signal(syscall.SIGTERM)
		if err := waitExit(t, n.lnode, 15*time.Second); err != nil {
			t.Fatalf("%s's exit after SIGTERM: %v", n.id, err)
		}
		exited := time.Since(t0)
		took := c.waitMoved(n.id, mine, t0, handover)
		released := map[int]bool{}
		for _, ev := range c.grants() {
			if ev.kind == "release" && ev.node == n.id && mine[ev.shard] == ev.epoch {
				released[ev.shard] = true
			}
		}
		if len(released) != len(mine) {
			t.Fatalf("%s released %d of its %d shards", n.id, len(released), len(mine))
		}
		start := time.Now()
		n.start()
		waitFor(t, n.id+"'s readiness", 60*time.Second, n.ready)
		w.down[i].Store(false)
		waitFor(t, n.id+" owning shards again", 60*time.Second, func() bool { return c.spread(clusterIDs...) })
		t.Logf("%s: exited %v after SIGTERM, its %d shards owned by the others %v after it, back with shards %v after its start",
			n.id, exited.Round(time.Millisecond), len(mine), took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	keys := w.finish()
	c.waitRendered(keys, 120*time.Second)
	if got := c.countRows("freshq_schedule"); got != len(keys) {
		t.Fatalf("%d schedule rows for %d acknowledged targets", got, len(keys))
	}
	if below := c.rowsBelowFloor(); below != 0 {
		t.Fatalf("%d rows below their floor", below)
	}
	c.checkGrants()
}
