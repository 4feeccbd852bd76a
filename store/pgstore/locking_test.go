package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/storetest"
	"github.com/freshq/freshq/testkit/pgtest"
)

// The proof that PostgreSQL's row locks serialise a floor advance against a write in flight
// (doc.go). A write is held in BeforeCommit: it has locked its shard's floor row (FOR UPDATE),
// lowered that floor and staged its row, and has not committed. A concurrent AdvanceFloor
// must wait on that lock — seen as a backend of this database waiting on a lock in the
// advance's FOR UPDATE — and must not return until the write is released; after both, the
// written row is not below its shard's floor. Without the advance's FOR UPDATE, its UPDATE of
// the floor rows still waits for the write, but then overwrites the lowered floor with a bound
// computed before the write committed, and this test fails.
func TestAdvanceWaitsForTheWriteHoldingItsShard(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	db := rawPool(t, dsn)
	var hold storetest.Hook
	f := store.NewMemFloor(0)
	st := openStore(t, dsn, &pgstore.Options{Shards: 16, Floor: f, TestSignals: store.TestSignals{BeforeCommit: hold.Run}})
	ctx := context.Background()

	var ws []store.Write
	for i := range 5 {
		s, _ := store.NewSchedule([]byte{'r', byte('0' + i)}, 9_000+int64(i), false, 0, store.Lanes{})
		ws = append(ws, store.Write{Schedule: s})
	}
	if err := st.WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
	p := storetest.RunPass(t, st, 10_000)
	p.AdvanceFloor(100) // every shard's floor rises: to 8900 and above
	p.Close()
	old := []byte("old")
	shard := pgstore.Shard(old, st.Shards())
	// Alone in its shard, the write is the only row an advance could miss there: the advance
	// would raise that floor to now − guard.
	for _, w := range ws {
		if pgstore.Shard(w.Schedule.Key(), st.Shards()) == shard {
			t.Fatalf("setup: %s shares shard %d with the write", w.Schedule.Key(), shard)
		}
	}
	if fl := shardFloors(t, db)[shard]; fl <= 1_000 {
		t.Fatalf("setup: the floor of shard %d is %d, want it above the write's due 1000", shard, fl)
	}

	held, release := make(chan struct{}), make(chan struct{})
	hold.Set(func() { hold.Set(nil); close(held); <-release })
	wrote := make(chan error, 1)
	sch, _ := store.NewSchedule(old, 1_000, false, 0, store.Lanes{})
	go func() { wrote <- st.WriteSchedule(sch) }()
	<-held

	p = storetest.RunPass(t, st, 20_000)
	defer p.Close()
	type advance struct {
		floor int64
		moved bool
	}
	advanced := make(chan advance, 1)
	go func() { fl, ok := p.AdvanceFloor(100); advanced <- advance{fl, ok} }()

	// The advance waits on a row lock, in its FOR UPDATE of the floor rows.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'
			  AND query LIKE '%FROM freshq_floor f WHERE f.shard = ANY($1) ORDER BY f.shard FOR UPDATE%'`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting == 1 {
			break
		}
		select {
		case a := <-advanced:
			t.Fatalf("the advance returned (%+v) while the write held its shard's lock", a)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no advance waiting on the write's lock after 30 s")
		}
		time.Sleep(5 * time.Millisecond) // polling for a condition, not letting time pass
	}
	select {
	case a := <-advanced:
		t.Fatalf("the advance returned (%+v) while the write held its shard's lock", a)
	case <-time.After(100 * time.Millisecond):
	}

	close(release)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	a := <-advanced
	floors := shardFloors(t, db)
	if floors[shard] > 1_000 {
		t.Fatalf("shard %d's floor is %d, above the row written at 1000", shard, floors[shard])
	}
	if a.floor > 1_000 || f.Load() > 1_000 || st.HeadMs() > 1_000 {
		t.Fatalf("after the advance (%+v): cell %d, head %d, above the row written at 1000", a, f.Load(), st.HeadMs())
	}
	// Every other shard moved, and no row is below its shard's floor.
	if !a.moved {
		t.Fatal("the advance moved no shard's floor")
	}
	rows, err := db.Query(ctx, `SELECT s.cache_key, s.due_at_ms, f.floor_ms FROM freshq_schedule s
		JOIN freshq_floor f ON f.shard = s.shard WHERE s.due_at_ms < f.floor_ms`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var key []byte
		var due, floor int64
		_ = rows.Scan(&key, &due, &floor)
		t.Errorf("row %s due %d below its shard's floor %d", key, due, floor)
	}
}
