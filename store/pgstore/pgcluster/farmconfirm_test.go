package pgcluster_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/testkit/pgtest"
)

// TestFarmConfirmBoard: a node's confirmation, published through one store, is read through
// another with its node, division, demand, the division before and time on the database's
// clock; a later one replaces it; a node's time is the later of its confirmation and its
// heartbeat, and a confirmation outlives its node's record (a node gone lately may still
// render).
func TestFarmConfirmBoard(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	a := openCluster(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-a"}, nil)
	b := openCluster(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-b"}, nil)
	ctx := context.Background()
	if err := a.PublishConfirm(ctx, store.FarmConfirm{Node: "node-a", Members: 77, Round: -1, PrevRound: -1}); err != nil {
		t.Fatal(err)
	}
	wantA := store.FarmConfirm{Node: "node-a", Members: 77, Round: 12, Basis: 5, Demand: map[string]int{"shop.test": 40},
		PrevMembers: 77, PrevRound: 11, PrevBasis: 0, PrevDemand: map[string]int{"shop.test": 41, "blog.test": 2}, InFlight: 3}
	if err := a.PublishConfirm(ctx, wantA); err != nil {
		t.Fatal(err)
	}
	if err := b.PublishConfirm(ctx, store.FarmConfirm{Node: "node-b", Members: 78, Round: 11, PrevRound: -1, InFlight: 1}); err != nil {
		t.Fatal(err)
	}
	cs, now, err := b.ReadConfirms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Node != "node-a" || cs[1].Node != "node-b" {
		t.Fatalf("read %+v; want node-a and node-b", cs)
	}
	got := cs[0]
	if got.Members != 77 || got.Round != 12 || got.Basis != 5 || !maps.Equal(got.Demand, wantA.Demand) ||
		got.PrevMembers != 77 || got.PrevRound != 11 || got.PrevBasis != 0 || !maps.Equal(got.PrevDemand, wantA.PrevDemand) || got.InFlight != 3 {
		t.Fatalf("node-a read back %+v, want %+v", got, wantA)
	}
	if cs[1].Members != 78 || cs[1].Round != 11 || len(cs[1].Demand) != 0 {
		t.Fatalf("node-b read back %+v", cs[1])
	}
	for _, c := range cs {
		if c.AtMs > now || c.AtMs < now-time.Minute.Milliseconds() {
			t.Fatalf("%s confirmed at %d, the database's clock is %d", c.Node, c.AtMs, now)
		}
	}
	// node-a's heartbeat, later than its confirmation, is its time.
	if err := a.Register(ctx, "node-a", "127.0.0.1:1", "inc-1", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	cs2, _, err := a.ReadConfirms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(cs2, func(c store.FarmConfirm) bool { return c.Node == "node-a" }); i < 0 || cs2[i].AtMs < cs[0].AtMs {
		t.Fatalf("node-a's time %+v after a heartbeat; was %d", cs2, cs[0].AtMs)
	}
	if err := a.Deregister(ctx, "node-a", "inc-1"); err != nil {
		t.Fatal(err)
	}
	cs3, _, _ := b.ReadConfirms(ctx)
	if !slices.ContainsFunc(cs3, func(c store.FarmConfirm) bool { return c.Node == "node-a" }) {
		t.Fatalf("node-a's confirmation went with its record: %+v", cs3)
	}
}
