package pgcluster_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/testkit/pgtest"
)

// TestFarmConfirmBoard: a node's confirmation, published through one store, is read through
// another with its node, division and time on the database's clock; a later one replaces it;
// a node's time is the later of its confirmation and its heartbeat, and a confirmation
// outlives its node's record (a node gone lately may still render).
func TestFarmConfirmBoard(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	a := openCluster(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-a"}, nil)
	b := openCluster(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-b"}, nil)
	ctx := context.Background()
	if err := a.PublishConfirm(ctx, "node-a", 77, -1, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.PublishConfirm(ctx, "node-a", 77, 12, 3); err != nil {
		t.Fatal(err)
	}
	if err := b.PublishConfirm(ctx, "node-b", 78, 11, 1); err != nil {
		t.Fatal(err)
	}
	nodes, members, rounds, at, now, err := b.ReadConfirms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(nodes, []string{"node-a", "node-b"}) || !slices.Equal(members, []int64{77, 78}) || !slices.Equal(rounds, []int64{12, 11}) {
		t.Fatalf("read %v %v %v; want node-a (77, 12) and node-b (78, 11)", nodes, members, rounds)
	}
	for i, ms := range at {
		if ms > now || ms < now-time.Minute.Milliseconds() {
			t.Fatalf("%s confirmed at %d, the database's clock is %d", nodes[i], ms, now)
		}
	}
	// node-a's heartbeat, later than its confirmation, is its time.
	if err := a.Register(ctx, "node-a", "127.0.0.1:1", "inc-1", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	nodes, _, _, at2, _, err := a.ReadConfirms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(nodes, "node-a"); i < 0 || at2[i] < at[0] {
		t.Fatalf("node-a's time %v after a heartbeat; was %d", at2, at[0])
	}
	if err := a.Deregister(ctx, "node-a", "inc-1"); err != nil {
		t.Fatal(err)
	}
	if nodes, _, _, _, _, _ = b.ReadConfirms(ctx); !slices.Contains(nodes, "node-a") {
		t.Fatalf("node-a's confirmation went with its record: %v", nodes)
	}
}
