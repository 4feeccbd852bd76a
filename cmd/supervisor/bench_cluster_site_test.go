package main

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

const (
	siteLimit = 2                      // render.hosts.max_concurrency: below the node count
	siteNodes = 3                      // nodes
	siteHold  = 200 * time.Millisecond // the origin's answer time
)

// BenchmarkClusterSiteBelowNodes measures how much of one site's limit a cluster uses when the
// limit (2) is below the node count (3): the remainder of the division rotates among the nodes
// and follows their demand (docs/CLUSTER.md), and each move idles a slot while the renders of
// the node that gives it up end. Three real nodes on one PostgreSQL database at the defaults
// (cluster.lease_ttl 10 s, render.timeout 60 s), the http renderer on a local origin that
// answers each request in 200 ms; b.N pages of the site are posted through one node once every
// node counts three live nodes.
//
// One op is one page. Measured at the origin, from the first request's arrival to the last
// one's answer (the window): pages/s, the render rate of a slot (pages ÷ the seconds the
// origin spent answering them), limit-% = pages/s ÷ (limit × render rate), which is the
// origin's mean requests in flight over the window ÷ the limit, and the most in flight at
// once (max-at-once, never above the limit).
func BenchmarkClusterSiteBelowNodes(b *testing.B) {
	if binDir == "" {
		b.Skip("binaries not built (-short)")
	}
	be := postgresFor(b)
	o := newHostOrigin(b, siteHold, func(*hostOrigin, time.Time) (int, string) { return http.StatusOK, "" })
	nodes := make([]*node, siteNodes)
	for i := range nodes {
		yaml := confirmYAML + be.yaml + fmt.Sprintf("node: {id: site-%d}\n", i)
		nodes[i] = startNode(b, b.TempDir(), 2, yaml, "")
	}
	for _, n := range nodes {
		waitFor(b, "readiness", 120*time.Second, n.ready)
	}
	waitFor(b, "every node counting the others", 2*time.Minute, func() bool {
		for _, n := range nodes {
			if f, ok := n.farm(); !ok || f.Nodes != siteNodes {
				return false
			}
		}
		return true
	})
	b.ResetTimer()
	const batch = 500
	for i := 0; i < b.N; i += batch {
		items := make([]wire.TargetItem, 0, batch)
		for j := i; j < min(i+batch, b.N); j++ {
			items = append(items, wire.TargetItem{URL: fmt.Sprintf("%s/site-%07d", o.URL, j), Source: "api"})
		}
		if acked, err := (&clusterNode{lnode: &lnode{node: nodes[0]}}).postTargets(items); err != nil || !acked {
			b.Fatalf("POST of pages %d–%d: acked %v, %v", i, i+len(items), acked, err)
		}
	}
	waitFor(b, "every page rendered", time.Duration(b.N)*siteHold+10*time.Minute, func() bool { return o.okPaths() >= b.N })
	b.StopTimer()
	hits := o.snapshot()
	var first, last time.Time
	var busy time.Duration
	for _, h := range hits {
		left := h.left
		if left.IsZero() {
			left = time.Now()
		}
		if first.IsZero() || h.arrived.Before(first) {
			first = h.arrived
		}
		if left.After(last) {
			last = left
		}
		busy += left.Sub(h.arrived)
	}
	window := last.Sub(first)
	rate := float64(len(hits)) / busy.Seconds() // a slot's renders per second
	pages := float64(len(hits)) / window.Seconds()
	b.ReportMetric(pages, "pages/s")
	b.ReportMetric(rate, "slot-renders/s")
	b.ReportMetric(100*pages/(siteLimit*rate), "limit-%")
	b.ReportMetric(float64(o.maxInFlightSince(time.Time{})), "max-at-once")
	for _, n := range nodes {
		n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range nodes {
		<-n.exited
	}
}
