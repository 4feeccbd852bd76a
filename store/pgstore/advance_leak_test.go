package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/pgstore/pgcluster"
	"github.com/freshq/freshq/store/storetest"
	"github.com/freshq/freshq/testkit/pgtest"
)

// An advance that finds nothing to advance (the node holds no shard yet, or has lost every
// shard it believes it holds) ends its transaction. Left open, each such advance kept a pooled
// connection idle in its transaction, holding the lost shard's floor row locked FOR UPDATE and
// its lease row FOR SHARE: the node's pool ran dry after a few sweeps (its heartbeat could no
// longer get a connection, so it dropped out of the cluster), and every other node's write to
// or acquire of that shard waited on the locks.
func TestAdvanceWithNothingHeldEndsItsTransaction(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	st := openStore(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-a"})
	db := rawPool(t, dsn)
	ctx := context.Background()
	idleInTx := func() int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND state LIKE 'idle in transaction%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	advance := func() {
		p := storetest.RunPass(t, st, 5_000)
		p.AdvanceFloor(100)
		p.Close()
	}

	// A node that holds nothing yet (a node that has just joined).
	for range 3 {
		advance()
	}
	if n := idleInTx(); n != 0 {
		t.Fatalf("advances of a node holding no shard left %d transactions open", n)
	}

	// A node that believes it holds shard 5, which another node has taken.
	const lost = int32(5)
	e, ok, err := pgcluster.New(st, nil).Acquire(ctx, "node-a", lost, 0, time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if err := st.SetOwned(ctx, []int32{lost}, []int64{e}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE freshq_shard_lease SET owner = 'node-b', epoch = epoch + 1 WHERE shard = $1`, lost); err != nil {
		t.Fatal(err)
	}
	advance()
	if n := idleInTx(); n != 0 {
		t.Fatalf("the fenced advance left %d transactions open", n)
	}
	// The shard's floor row is not left locked: another node's write to it commits.
	other := openStore(t, dsn, &pgstore.Options{Shards: clusterShards})
	sch, _ := store.NewSchedule(keyIn(t, lost, 7), 1_000, false, 60_000, store.Lanes{})
	done := make(chan error, 1)
	go func() { done <- other.WriteSchedule(sch) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write to the lost shard still waits after 30s: the fenced advance holds its floor row's lock")
	}
}
