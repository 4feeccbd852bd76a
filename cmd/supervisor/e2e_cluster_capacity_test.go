package main

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

// getJSON reads path from the node into v; false when the node does not answer 200 with JSON.
func (n *node) getJSON(path string, v any) bool {
	resp, err := http.Get("http://" + n.addr + path)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && json.Unmarshal(b, v) == nil
}

// ownRenders sums the node's renders by outcome, from its /metrics.
func (n *clusterNode) ownRenders() float64 {
	total := 0.0
	for name, v := range n.metrics() {
		if strings.HasPrefix(name, "freshq_render_total{") {
			total += v
		}
	}
	return total
}

// The farm's capacity is the sum of its nodes': three real nodes render a corpus posted
// through all of them; once the renders are over, every node's GET /v1/cluster shows the same
// farm — three nodes reporting, their summed renders equal to the renders each node measured
// itself (its own /v1/queue capacity section, and its render counters), the summed rate equal
// to the sum of the rates each published, and the farm's demand the corpus's rows, each counted
// once (by its shard's owner) although every node filed some rows of every shard — and the
// node's /v1/queue carries the same farm in its cluster section.
//
// It could fail: a node that summed its own figures only, a sum that counted a node twice or a
// writer's rows beside their owner's, figures that did not travel with the heartbeat (the farm
// would show "unknown" nodes), or nodes reading different sums.
func TestClusterCapacityIsTheFarms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	c := newCluster(t, clusterOptions{nodes: 3, workers: 2, leaseTTL: 2 * time.Second, yaml: clusterYAML("5ms")})
	c.settle(clusterIDs...)
	before := c.leases()
	w := startLoad(c, "farm", 50, 3, 0) // through node-b, node-c, node-a in turn
	keys := w.finish()
	c.waitRendered(keys, 30*time.Second)

	// The renders are over (the corpus's cadence is a day); wait until the heartbeats carry the
	// last of them: every node's published renders equal to what it measured itself.
	var own [3]wire.QueueView
	var farms [3]wire.ClusterView
	read := func() bool {
		for i, n := range c.nodes {
			if !n.getJSON("/v1/queue", &own[i]) || own[i].Capacity == nil || own[i].Cluster == nil || own[i].Cluster.Capacity == nil ||
				!n.getJSON(wire.PathCluster, &farms[i]) || farms[i].Farm == nil {
				return false
			}
		}
		var measured int64
		for i := range c.nodes {
			measured += own[i].Capacity.Capacity.Renders
		}
		// Both views of a node are read a moment apart, each from the heartbeats it last read:
		// wait until both carry the last figures, then judge them (below).
		for i := range c.nodes {
			if f := farms[i].Farm; f.Reporting != 3 || f.Capacity.Capacity.Renders != measured || f.Demand.Rows != int64(len(keys)) {
				return false
			}
			if q := own[i].Cluster.Capacity; q.Capacity.Capacity.Renders != measured || q.Demand.Rows != int64(len(keys)) {
				return false
			}
		}
		return measured >= int64(len(keys))
	}
	// The bound: a heartbeat (lease_ttl/4) carries the last figures; a shard's rows are counted
	// by its owner at their render, so the demand needs no recount here.
	waitFor(t, "every node's /v1/cluster to carry every node's last renders and rows", 10*time.Second, read)
	if after := c.leases(); !slices.Equal(before, after) {
		t.Fatalf("ownership moved during the test (a result fenced is rendered but not applied): %v → %v", before, after)
	}

	var measured int64
	var counted, measuredRate float64
	for i, n := range c.nodes {
		measured += own[i].Capacity.Capacity.Renders
		measuredRate += own[i].Capacity.Capacity.PerSecond
		counted += n.ownRenders()
	}
	f0 := farms[0].Farm
	t.Logf("farm: %d renders, %.3f renders/s (the nodes' own views: %d, %.3f/s; their render counters: %.0f); demand %d rows, %.6f renders/s; %s",
		f0.Capacity.Capacity.Renders, f0.Capacity.Capacity.PerSecond, measured, measuredRate, counted, f0.Demand.Rows, f0.Demand.Total, f0.Projection.Verdict)
	if float64(measured) != counted {
		t.Fatalf("the nodes' meters count %d renders, their render counters %.0f", measured, counted)
	}
	for i, fv := range farms {
		f := fv.Farm
		id := c.nodes[i].id
		if f.Nodes != 3 || f.Reporting != 3 || len(f.Unknown) != 0 || len(f.PerNode) != 3 {
			t.Fatalf("%s: farm of %d nodes, %d reporting, unknown %v", id, f.Nodes, f.Reporting, f.Unknown)
		}
		// The sum is the published figures' sum, in the view that carried them.
		var rate float64
		var rows int64
		for _, pn := range f.PerNode {
			if pn.Capacity == nil {
				t.Fatalf("%s: %s's figures unknown", id, pn.ID)
			}
			rate += pn.Capacity.CapacityPerSecond
			rows += pn.Capacity.DemandRows
		}
		if math.Abs(rate-f.Capacity.Capacity.PerSecond) > 1e-9 || rows != f.Demand.Rows {
			t.Fatalf("%s: farm %.6f/s %d rows, its nodes' figures %.6f/s %d rows", id, f.Capacity.Capacity.PerSecond, f.Demand.Rows, rate, rows)
		}
		// The summed rate is the nodes' own measured rates (read moments apart: the windows grew).
		if math.Abs(f.Capacity.Capacity.PerSecond-measuredRate) > 0.1*measuredRate {
			t.Fatalf("%s: farm %.3f renders/s, the nodes' own views %.3f/s", id, f.Capacity.Capacity.PerSecond, measuredRate)
		}
		// Each row is counted once, by its shard's owner: every row was rendered by its owner,
		// which counted it then, and the rows a node filed for another's shard are not its demand.
		if f.Demand.Rows != int64(len(keys)) {
			t.Fatalf("%s: farm demand %d rows, the corpus has %d", id, f.Demand.Rows, len(keys))
		}
		// Every node answers the same farm.
		if f.Capacity.Capacity.Renders != f0.Capacity.Capacity.Renders || f.Demand.Total != f0.Demand.Total {
			t.Fatalf("%s: farm %d renders, demand %v; %s's: %d, %v", id, f.Capacity.Capacity.Renders, f.Demand.Total,
				c.nodes[0].id, f0.Capacity.Capacity.Renders, f0.Demand.Total)
		}
		if q := own[i].Cluster.Capacity; q.Reporting != 3 || q.Demand.Rows != f.Demand.Rows {
			t.Fatalf("%s: /v1/queue's cluster.capacity %d reporting, %d rows", id, q.Reporting, q.Demand.Rows)
		}
	}
	if f0.Projection.Verdict != "keeping up" {
		t.Fatalf("the farm renders %.3f/s for a demand of %.6f/s: verdict %q", f0.Capacity.Capacity.PerSecond, f0.Demand.Total, f0.Projection.Verdict)
	}
}
