package pgcluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/testkit/pgtest"
)

func TestClusterMembershipRecords(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	st := openCluster(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-a"}, nil)
	ctx := context.Background()
	ttl := time.Minute

	if err := st.Register(ctx, "node-a", "127.0.0.1:1", "inc-1", ttl); err != nil {
		t.Fatal(err)
	}
	if err := st.Register(ctx, "node-a", "127.0.0.1:1", "inc-2", ttl); !errors.Is(err, cluster.ErrIdentityInUse) {
		t.Fatalf("a second process under a live node's identity: %v, want ErrIdentityInUse", err)
	}
	if err := st.Register(ctx, "node-a", "127.0.0.1:1", "inc-1", ttl); err != nil {
		t.Fatalf("the same incarnation again (a restarted worker 0): %v", err)
	}
	if err := st.Heartbeat(ctx, "node-a", "inc-2"); !errors.Is(err, cluster.ErrIdentityInUse) {
		t.Fatalf("a heartbeat of another incarnation: %v", err)
	}

	epoch, ok, err := st.Acquire(ctx, "node-a", 3, 0, ttl)
	if err != nil || !ok || epoch != 1 {
		t.Fatalf("acquire a free shard: epoch %d, ok %v, %v", epoch, ok, err)
	}
	if _, ok, _ := st.Acquire(ctx, "node-b", 3, 1, ttl); ok {
		t.Fatal("node-b acquired node-a's unexpired lease")
	}
	if _, ok, _ := st.Acquire(ctx, "node-b", 3, 0, ttl); ok {
		t.Fatal("an acquire at a stale epoch succeeded")
	}
	renewed, err := st.Renew(ctx, "node-a", []int32{3}, []int64{1}, ttl)
	if err != nil || !renewed[3] {
		t.Fatalf("renew: %v, %v", renewed, err)
	}
	if err := st.Release(ctx, "node-a", []int32{3}, []int64{1}); err != nil {
		t.Fatal(err)
	}
	epoch, ok, err = st.Acquire(ctx, "node-b", 3, 1, ttl)
	if err != nil || !ok || epoch != 2 {
		t.Fatalf("acquire a handed-over shard: epoch %d, ok %v, %v", epoch, ok, err)
	}
	if renewed, _ := st.Renew(ctx, "node-a", []int32{3}, []int64{1}, ttl); renewed[3] {
		t.Fatal("node-a renewed a lease it lost")
	}
	v, err := st.ReadView(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Leases) != clusterShards || v.Leases[3].Owner != "node-b" || v.Leases[3].Epoch != 2 || len(v.Nodes) != 1 {
		t.Fatalf("view: %d leases, shard 3 %+v, nodes %+v", len(v.Leases), v.Leases[3], v.Nodes)
	}
	if view := cluster.View(v); !view.Live(&view.Nodes[0], ttl) {
		t.Fatal("node-a, which just heartbeat, is not live")
	}
}

// A node's capacity figures travel with its heartbeat: a row no node published figures into
// (an older version's Register, or before the first heartbeat) reads as unknown (nil), not as
// zero; HeartbeatFigures stores them with the heartbeat; a plain Heartbeat keeps them; a new
// incarnation of the node starts unknown again (the last run's figures are not its own).
func TestHeartbeatCarriesCapacityFigures(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	st := openCluster(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-a"}, nil)
	ctx := context.Background()
	ttl := time.Minute
	// node-old is a row as a node of schema version 3 writes it: no capacity column named.
	db := rawPool(t, dsn)
	if _, err := db.Exec(ctx, `INSERT INTO freshq_node (node_id, addr, incarnation, started_at, heartbeat_at)
		VALUES ('node-old', 'x:1', 'i', clock_timestamp(), clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	if err := st.Register(ctx, "node-a", "127.0.0.1:1", "inc-1", ttl); err != nil {
		t.Fatal(err)
	}
	figures := func() map[string][]byte {
		t.Helper()
		v, err := st.ClusterView(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for _, n := range v.Nodes {
			out[n.ID] = n.Capacity
		}
		return out
	}
	if f := figures(); f["node-old"] != nil || f["node-a"] != nil {
		t.Fatalf("before any figures: old %q, node-a %q; want both unknown (nil)", f["node-old"], f["node-a"])
	}
	if err := st.HeartbeatFigures(ctx, "node-a", "inc-1", []byte(`{"capacity_per_second": 1.5, "renders": 12}`)); err != nil {
		t.Fatal(err)
	}
	var got struct {
		PerSecond float64 `json:"capacity_per_second"`
		Renders   int64   `json:"renders"`
	}
	if err := json.Unmarshal(figures()["node-a"], &got); err != nil || got.PerSecond != 1.5 || got.Renders != 12 {
		t.Fatalf("figures read back %+v (%v), want 1.5/s, 12 renders", got, err)
	}
	if err := st.Heartbeat(ctx, "node-a", "inc-1"); err != nil {
		t.Fatal(err)
	}
	if figures()["node-a"] == nil {
		t.Fatal("a plain heartbeat dropped the figures")
	}
	if err := st.HeartbeatFigures(ctx, "node-a", "inc-2", []byte(`{}`)); err == nil {
		t.Fatal("another incarnation's figures were stored")
	}
	if err := st.SetStopping(ctx, "node-a", "inc-1"); err != nil {
		t.Fatal(err)
	}
	if err := st.Register(ctx, "node-a", "127.0.0.1:1", "inc-2", ttl); err != nil {
		t.Fatal(err)
	}
	if f := figures()["node-a"]; f != nil {
		t.Fatalf("a new incarnation starts with the last run's figures %q", f)
	}
}
