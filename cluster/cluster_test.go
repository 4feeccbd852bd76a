package cluster

import (
	"fmt"
	"testing"
	"time"
)

func TestDesiredMovesOnlyTheShardsOfTheNodeThatLeaves(t *testing.T) {
	const shards = 256
	three := []string{"node-a", "node-b", "node-c"}
	two := []string{"node-a", "node-c"}
	counts := map[string]int{}
	for sh := range int32(shards) {
		before, after := Desired(sh, three), Desired(sh, two)
		counts[before]++
		if before != "node-b" && after != before {
			t.Fatalf("shard %d moved from %s to %s when node-b left", sh, before, after)
		}
		if after == "node-b" {
			t.Fatalf("shard %d desired by node-b, which left", sh)
		}
	}
	for _, id := range three {
		if n := counts[id]; n < shards/3/2 || n > shards/3*2 {
			t.Fatalf("node %s wins %d of %d shards: %v", id, n, shards, counts)
		}
	}
	if Desired(7, nil) != "" {
		t.Fatal("a shard has a desired owner among no nodes")
	}
}

func TestPlanFor(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	ttl := 10 * time.Second
	live := func(id string) Node { return Node{ID: id, HeartbeatAt: now.Add(-time.Second)} }
	view := View{Now: now, Nodes: []Node{live("node-a"), live("node-b"), {ID: "node-c", HeartbeatAt: now.Add(-ttl)}}}
	// Find shards with each desired owner among the live a and b.
	var wantA, wantB []int32
	for sh := int32(0); len(wantA) < 3 || len(wantB) < 3; sh++ {
		if Desired(sh, []string{"node-a", "node-b"}) == "node-a" {
			wantA = append(wantA, sh)
		} else {
			wantB = append(wantB, sh)
		}
	}
	future, past := now.Add(ttl), now.Add(-time.Millisecond)
	view.Leases = []Lease{
		{Shard: wantA[0], Owner: "node-a", Epoch: 4, ExpiresAt: future}, // keep
		{Shard: wantA[1], Owner: "", Epoch: 2, ExpiresAt: past},         // acquire: free
		{Shard: wantA[2], Owner: "node-c", Epoch: 9, ExpiresAt: past},   // acquire: expired
		{Shard: wantB[0], Owner: "node-a", Epoch: 3, ExpiresAt: future}, // release to b
		{Shard: wantB[1], Owner: "node-b", Epoch: 1, ExpiresAt: future}, // none of a's business
		{Shard: wantB[2], Owner: "", Epoch: 0},                          // b's to take
	}
	p := PlanFor(&view, "node-a", ttl)
	got := fmt.Sprint(p.Keep, p.Release, p.Acquire)
	want := fmt.Sprint([]Lease{view.Leases[0]}, []Lease{view.Leases[3]}, []Lease{view.Leases[1], view.Leases[2]})
	if got != want {
		t.Fatalf("plan\n got %s\nwant %s", got, want)
	}
	// A live owner that is not desired keeps its shard until it hands it over.
	view.Leases = []Lease{{Shard: wantA[0], Owner: "node-b", Epoch: 5, ExpiresAt: future}}
	if p := PlanFor(&view, "node-a", ttl); len(p.Acquire)+len(p.Keep)+len(p.Release) != 0 {
		t.Fatalf("node-a takes a live node's unexpired lease: %+v", p)
	}
	// A stopping node is not live: it keeps nothing and releases everything it holds.
	view.Nodes[0].Stopping = true
	view.Leases = []Lease{{Shard: wantA[0], Owner: "node-a", Epoch: 5, ExpiresAt: future}}
	if p := PlanFor(&view, "node-a", ttl); len(p.Release) != 1 || len(p.Keep) != 0 {
		t.Fatalf("a stopping node's plan: %+v", p)
	}
}
