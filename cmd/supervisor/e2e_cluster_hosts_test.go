package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/wire"
)

// A host's limit and its pauses across the cluster, end to end: three real nodes on one
// PostgreSQL, rendering a local origin with the http renderer. The origin counts what it
// serves at once and when each request arrived; the tests judge the cluster by what the
// origin saw, never by what a node says of itself.

const (
	farmTTL    = 2 * time.Second // cluster.lease_ttl: the cluster ticks every 500 ms
	farmRender = 3 * time.Second // render.timeout
	farmHold   = 300 * time.Millisecond
	// farmFirst is how many pages the host limit's first phase posts: at 300 ms a page, the
	// least part a node holds (6 of 32 shards, seen) is ~28 pages, 8 s at one slot, against
	// a grace of 4.5 s and a sweep of 1 s.
	farmFirst = 150
	// farmSecond is how many pages the second phase posts, once a node is killed. They are
	// split between the two nodes left by the shards each holds (a quarter of them or more).
	// Through the grace one of them may hold the host's only slot (the three-node division's
	// round gives the other none) and render a dozen pages alone; its part must outlast that
	// for the origin to see both nodes' slots at once after it. With 60 pages, an uneven split
	// left that node's part done before the grace had ended.
	farmSecond = farmFirst
)

// farmYAML is every node's configuration: the http renderer on the local origin, eight renders
// in flight a node, and the origin's limit.
func farmYAML(maxConcurrency int) string {
	return fmt.Sprintf(`queue: {ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 2s}
render:
  renderer: http
  timeout: %s
  concurrency: 8
  domains: ["127.0.0.1"]
  hosts: {max_concurrency: %d}
`, farmRender, maxConcurrency)
}

// farm reads the node's farm membership from /v1/queue's cluster section.
func (n *node) farm() (wire.QueueFarm, bool) {
	resp, err := http.Get("http://" + n.addr + "/v1/queue")
	if err != nil {
		return wire.QueueFarm{}, false
	}
	defer resp.Body.Close()
	var q wire.QueueView
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || json.Unmarshal(b, &q) != nil ||
		q.Cluster == nil || q.Cluster.Farm == nil {
		return wire.QueueFarm{}, false
	}
	return *q.Cluster.Farm, true
}

// waitFarm waits until every node of ns counts len(ns) live nodes, and returns when the last of
// them took that membership (its own clock, as the test's: one machine).
func waitFarm(t *testing.T, ns []*clusterNode, limit time.Duration) time.Time {
	t.Helper()
	var since int64
	waitFor(t, fmt.Sprintf("%d nodes dividing the hosts' limits", len(ns)), limit, func() bool {
		since = 0
		for _, n := range ns {
			f, ok := n.farm()
			if !ok || f.Nodes != len(ns) {
				return false
			}
			since = max(since, f.SinceMs)
		}
		return true
	})
	return time.UnixMilli(since)
}

// postOrigin posts n targets of the origin, paths prefix-0000 on, through node.
func postOrigin(t *testing.T, node *clusterNode, o *hostOrigin, prefix string, n int) {
	t.Helper()
	items := make([]wire.TargetItem, n)
	for i := range items {
		items[i] = wire.TargetItem{URL: fmt.Sprintf("%s/%s-%04d", o.URL, prefix, i), Source: "api"}
	}
	if acked, err := node.postTargets(items); err != nil || !acked {
		t.Fatalf("POST through %s: acked %v, %v", node.id, acked, err)
	}
}

// maxInFlightSince is the most requests the origin served at once among those arriving at or
// after from.
func (o *hostOrigin) maxInFlightSince(from time.Time) int {
	m := 0
	for _, h := range o.snapshot() {
		if !h.arrived.Before(from) {
			m = max(m, h.inFlight)
		}
	}
	return m
}

// An origin limited by max_concurrency: 2, rendered by three nodes of eight render slots
// each: the origin never serves more than 2 requests at once (per node, 2 would allow 6), and
// every page renders — including those of the shards of the node that holds no share in a
// round (the remainder rotates). Then one node is killed (-9): the two left count two live
// nodes, and a grace later (a render's longest plus a tick) each holds one of the host's two
// slots, so the origin serves two at once again from them, and never more; the pages of the
// killed node's shards render.
//
// It fails if each node takes the whole limit (the origin sees up to 6), if the division is
// not re-made when a node dies (a third of the pages wait on the dead node's share for good,
// and the survivors' farm still counts three), or if a node whose share is 0 never gets one
// (its shards' pages never render).
func TestClusterHostLimitIsTheFarms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	o := newHostOrigin(t, farmHold, func(*hostOrigin, time.Time) (int, string) { return http.StatusOK, "" })
	c := newCluster(t, clusterOptions{nodes: 3, workers: 2, leaseTTL: farmTTL, yaml: farmYAML(2)})
	c.settle(clusterIDs...)
	waitFarm(t, c.nodes, 30*time.Second)

	// Enough pages that every node's part outlasts a grace and a sweep at one slot, even when
	// the shards are unevenly held and the pages arrive just as a round's grace begins (then
	// one node renders alone until it ends): the origin then sees two at once in any alignment.
	postOrigin(t, c.nodes[0], o, "first", farmFirst)
	waitFor(t, "the first pages rendered", 180*time.Second, func() bool { return o.okPaths() >= farmFirst })
	if m := o.maxInFlightSince(time.Time{}); m != 2 {
		t.Fatalf("three nodes served the origin %d requests at once; its limit is 2 (and the farm should use it whole)", m)
	}

	victim := c.nodes[2]
	victim.kill9()
	left := c.nodes[:2]
	changed := waitFarm(t, left, 30*time.Second)
	grace := hosts.FarmGrace(farmRender, farmTTL/4)
	t.Logf("the two nodes left divide the limit since %s; grace %s", changed.Format(time.RFC3339Nano), grace)
	postOrigin(t, c.nodes[1], o, "second", farmSecond)
	waitFor(t, "all the pages rendered", 180*time.Second, func() bool { return o.okPaths() >= farmFirst+farmSecond })
	if m := o.maxInFlightSince(time.Time{}); m > 2 {
		t.Fatalf("the origin served %d requests at once; its limit is 2", m)
	}
	after, last := 0, time.Time{}
	for _, h := range o.snapshot() {
		if !h.arrived.Before(changed.Add(grace)) {
			after++
		}
		last = h.arrived
	}
	t.Logf("%d requests after the grace, the last at change+%v", after, last.Sub(changed).Round(time.Millisecond))
	if m := o.maxInFlightSince(changed.Add(grace)); m != 2 {
		t.Fatalf("after the kill and a grace, the two nodes left served the origin at most %d at once; "+
			"each should hold one of its 2 slots", m)
	}
}

// A 429 with Retry-After: 3 answered to one node stops every node's requests to the host: the
// origin's limit (3) gives each of the three nodes one slot, all busy with 200 pages of 300 ms.
// The origin answers its 20th request 429 with Retry-After: 3, at T; the node that rendered
// it pauses the host when it applies the result and publishes the pause at once; every other
// node reads it at its next tick (500 ms here). So no request reaches the origin from T + one
// tick + 500 ms (the result's way to worker 0, the renders already in flight at the origin,
// loopback) until T + 3 s, and the renders resume after it.
//
// It fails if a pause stays on the node that saw it: the other two keep their slots busy
// through the 3 s.
func TestClusterRetryAfterPausesEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	const refuseAt = 20
	o := newHostOrigin(t, farmHold, func(o *hostOrigin, _ time.Time) (int, string) {
		if len(o.hits) == refuseAt-1 {
			return http.StatusTooManyRequests, "3"
		}
		return http.StatusOK, ""
	})
	c := newCluster(t, clusterOptions{nodes: 3, workers: 2, leaseTTL: farmTTL, yaml: farmYAML(3)})
	c.settle(clusterIDs...)
	waitFarm(t, c.nodes, 30*time.Second)
	postOrigin(t, c.nodes[0], o, "p", 200)
	select {
	case <-o.refused:
	case <-time.After(120 * time.Second):
		t.Fatal("the origin never refused")
	}
	o.mu.Lock()
	refusedAt := o.firstRefuse
	o.mu.Unlock()
	waitFor(t, "requests after the pause", 60*time.Second, func() bool {
		for _, h := range o.snapshot() {
			if h.arrived.After(refusedAt.Add(3 * time.Second)) {
				return true
			}
		}
		return false
	})
	bound := farmTTL/4 + 500*time.Millisecond
	var during []string
	for _, h := range o.snapshot() {
		if h.arrived.After(refusedAt.Add(bound)) && h.arrived.Before(refusedAt.Add(3*time.Second)) {
			during = append(during, fmt.Sprintf("%s at T+%v", h.path, h.arrived.Sub(refusedAt).Round(time.Millisecond)))
		}
	}
	if len(during) > 0 {
		t.Fatalf("%d requests reached the origin between T+%v and T+3s, the pause every node should keep: %v", len(during), bound, during)
	}
	before := 0
	for _, h := range o.snapshot() {
		if h.arrived.After(refusedAt.Add(-time.Second)) && h.arrived.Before(refusedAt) {
			before++
		}
	}
	if m := o.maxInFlightSince(time.Time{}); m > 3 {
		t.Fatalf("the origin served %d at once; its limit is 3", m)
	}
	t.Logf("%d requests in the second before the 429; none from T+%v to T+3s", before, bound)
}

// 50 requests with wait for one unknown URL, spread over three nodes of four, while the URL's
// shard is owned by the fourth, node-d: each of the three files and rushes it once (its own
// flight), node-d renders it once (one hit at the origin), and every waiter — none of them on
// the node whose Applier sees the result — is answered with the page within a second of the
// page's commit (read from the database), not at the end of its wait (60 s).
//
// It fails if a waiter is woken only by its own node's Applier: every waiter waits its 60 s
// out.
func TestClusterWaitersWokenAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSlowOrigin(t)
	// A node renders a host only a grace after it joined the others (render.timeout + a tick +
	// 1 s): the waits outlast it, and the render lands whenever it may.
	yaml := strings.Replace(missYAML, "timeout: 20s", "timeout: 5s", 1)
	yaml = strings.Replace(yaml, "max_wait: 30s", "max_wait: 60s", 1)
	c := newCluster(t, clusterOptions{nodes: 4, workers: 2, leaseTTL: farmTTL, yaml: yaml})
	c.settle(append(slices.Clone(clusterIDs), "node-d")...)
	owner := c.owners()
	var page, key string
	for i := 0; page == ""; i++ {
		u := fmt.Sprintf("%s/p/unknown-%d", origin.URL, i)
		k, shard := targetKey(t, u)
		if owner[shard] == "node-d" {
			page, key = u, k
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	type answered struct {
		waitAnswer
		node string
		at   time.Time
	}
	answers := make(chan answered, 50)
	for i := range 50 {
		n := c.nodes[i%3]
		go func() {
			a := n.getWaiting(client, page, "60s")
			answers <- answered{a, n.id, time.Now()}
		}()
	}
	waitFor(t, "50 waiters over the three nodes", 30*time.Second, func() bool {
		total := 0.0
		for _, n := range c.nodes[:3] {
			total += n.waiters()
		}
		return total == 50
	})
	waitFor(t, "the render at the origin", 30*time.Second, func() bool { return origin.hits.Load() == 1 })
	origin.letGo()
	var committed time.Time
	waitFor(t, "the page's commit", 30*time.Second, func() bool {
		var n int
		c.db.QueryRow(t.Context(), "SELECT count(*) FROM freshq_page WHERE cache_key = $1", []byte(key)).Scan(&n)
		if n == 1 {
			committed = time.Now() // polled every 50 ms: at most that after the commit
			return true
		}
		return false
	})
	want := fmt.Sprintf("<!doctype html><p>%s, hit 1</p>", strings.TrimPrefix(page, origin.URL))
	var late []string
	for range 50 {
		a := <-answers
		if a.code != http.StatusOK || a.body != want {
			t.Fatalf("a waiter on %s: %d %q, want 200 %q", a.node, a.code, a.body, want)
		}
		if d := a.at.Sub(committed); d > time.Second {
			late = append(late, fmt.Sprintf("%s +%v", a.node, d.Round(time.Millisecond)))
		}
	}
	if len(late) > 0 {
		t.Fatalf("%d waiters answered more than 1 s after the commit: %v", len(late), late)
	}
	if h := origin.hits.Load(); h != 1 {
		t.Fatalf("%d hits at the origin, want exactly 1", h)
	}
}
