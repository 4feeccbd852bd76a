package pgstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/pgstore/pgcluster"
	"github.com/freshq/freshq/store/storetest"
	"github.com/freshq/freshq/testkit/pgtest"
)

const clusterShards = 16

// keyIn returns a key of shard sh (among clusterShards), distinct per n.
func keyIn(t *testing.T, sh int32, n int) []byte {
	t.Helper()
	for i := 0; i < 100_000; i++ {
		k := fmt.Appendf(nil, "https://example.com/%d/%d", n, i)
		if pgstore.Shard(k, clusterShards) == sh {
			return k
		}
	}
	t.Fatalf("no key in shard %d", sh)
	return nil
}

// A node that lost a shard (another node took it at a later epoch) while it still believes it
// holds it: its pass reads none of the shard's rows, its advance leaves the shard's floor
// where it is, and a result for one of its keys is reported NotOwner and filed nowhere. The
// shard it still holds works as before.
func TestClusterFencesAShardTheNodeLost(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	var advances, results atomic.Int64
	st := openStore(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-a", Fenced: func(what pgstore.Fenced, n int) {
		switch what {
		case pgstore.FencedAdvance:
			advances.Add(int64(n))
		case pgstore.FencedResult:
			results.Add(int64(n))
		}
	}})
	reg := pgcluster.New(st, nil) // the leases' records
	db := rawPool(t, dsn)
	ctx := context.Background()
	ttl := time.Minute
	const kept, lost = int32(2), int32(5)
	var shards []int32
	var epochs []int64
	for _, sh := range []int32{kept, lost} {
		e, ok, err := reg.Acquire(ctx, "node-a", sh, 0, ttl)
		if err != nil || !ok {
			t.Fatalf("acquire %d: %v %v", sh, ok, err)
		}
		shards, epochs = append(shards, sh), append(epochs, e)
	}
	if err := st.SetOwned(ctx, shards, epochs); err != nil {
		t.Fatal(err)
	}
	keptKey, lostKey := keyIn(t, kept, 0), keyIn(t, lost, 1)
	for _, k := range [][]byte{keptKey, lostKey} {
		sch, _ := store.NewSchedule(k, 1_000, false, 60_000, store.Lanes{})
		if err := st.WriteSchedule(sch); err != nil {
			t.Fatal(err)
		}
	}
	if n := passRows(t, st, 5_000); n != 2 {
		t.Fatalf("a pass of the node holding both shards read %d rows, want 2", n)
	}

	// node-b takes the shard, as after node-a's lease expired.
	if _, err := db.Exec(ctx, `UPDATE freshq_shard_lease SET owner = 'node-b', epoch = epoch + 1 WHERE shard = $1`, lost); err != nil {
		t.Fatal(err)
	}
	floorsBefore := shardFloors(t, db)
	if n := passRows(t, st, 5_000); n != 1 {
		t.Fatalf("after losing shard %d the pass read %d rows, want 1 (the kept shard's)", lost, n)
	}
	p := storetest.RunPass(t, st, 5_000)
	p.AdvanceFloor(100)
	p.Close()
	floorsAfter := shardFloors(t, db)
	if floorsAfter[lost] != floorsBefore[lost] {
		t.Fatalf("the lost shard's floor moved from %d to %d", floorsBefore[lost], floorsAfter[lost])
	}
	if floorsAfter[kept] != 900 {
		t.Fatalf("the kept shard's floor is %d, want 900 (its row at 1000 − guard 100)", floorsAfter[kept])
	}
	if advances.Load() == 0 {
		t.Fatal("no fenced advance was counted")
	}

	var notOwner []string
	decide := func(k []byte) store.Change {
		return store.Change{Key: k, MinDueMs: 5_000, Decide: func(cur store.Current) (store.Write, bool, error) {
			if cur.NotOwner {
				notOwner = append(notOwner, string(k))
			}
			sch, _ := store.NewSchedule(k, 50_000, false, 60_000, store.Lanes{})
			return store.Write{Schedule: sch}, true, nil // a Decide that ignores NotOwner: the store refuses anyway
		}}
	}
	applied, err := st.Modify([]store.Change{decide(keptKey), decide(lostKey)})
	if err != nil {
		t.Fatal(err)
	}
	if !applied[0] || applied[1] {
		t.Fatalf("applied %v, want the kept shard's result only", applied)
	}
	if len(notOwner) != 1 || notOwner[0] != string(lostKey) || results.Load() != 1 {
		t.Fatalf("NotOwner seen for %q, fenced results %d; want the lost shard's key once", notOwner, results.Load())
	}
	if row, _ := st.GetSchedule(lostKey); row.DueAtMs != 1_000 {
		t.Fatalf("the lost shard's row was changed: due %d", row.DueAtMs)
	}
}

func passRows(t *testing.T, st store.Store, now int64) int {
	t.Helper()
	p, err := st.BeginPass(now)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	n := 0
	if err := p.IterateDue(0, 64, func(rows []store.DueRow) error { n += len(rows); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
