package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/storetest"
	"github.com/freshq/freshq/testkit/pgtest"
)

// Renders leave a dead tuple per row moved: once they reach the vacuum's least count, worker
// 0's check vacuums the table, and a check with none, or just after the vacuum, leaves it
// alone. (TestVacuumDue holds the thresholds.)
func TestVacuumIfDeadVacuumsOnceRendersLeaveEnoughDeadRows(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	// Without a classifier the store is not worker 0's and runs no vacuum loop: the test runs
	// the check itself.
	st := openStore(t, dsn, &pgstore.Options{Shards: 4})
	db := rawPool(t, dsn)
	ctx := context.Background()
	const rows = 12_000 // past the least count of dead tuples a vacuum waits for (10,000)
	// stats waits for PostgreSQL's statistics (flushed by each backend about a second after its
	// writes) to show what the writes did.
	stats := func(what string, ok func(live, dead, vacuums int64) bool) {
		t.Helper()
		var live, dead, vacuums int64
		for deadline := time.Now().Add(30 * time.Second); ; {
			if err := db.QueryRow(ctx, `SELECT n_live_tup, n_dead_tup, vacuum_count FROM pg_stat_user_tables
				WHERE relid = 'freshq_schedule'::regclass`).Scan(&live, &dead, &vacuums); err != nil {
				t.Fatal(err)
			}
			if ok(live, dead, vacuums) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the statistics still show %d live, %d dead, %d vacuums", what, live, dead, vacuums)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	writeRowsDue(t, st, 0, rows, 3_600_000, 1_000_000) // inserts: no dead tuple
	if vacuumed, live, dead, err := st.VacuumIfDead(ctx); err != nil || vacuumed {
		t.Fatalf("with %d live and %d dead tuples: vacuumed %v, err %v; want no vacuum", live, dead, vacuumed, err)
	}
	writeRowsDue(t, st, 0, rows, 3_600_000, 2_000_000) // every row moved, as a render moves it
	stats("every row moved", func(_, dead, _ int64) bool { return dead >= rows })
	vacuumed, live, dead, err := st.VacuumIfDead(ctx)
	if err != nil || !vacuumed {
		t.Fatalf("with %d live and %d dead tuples: vacuumed %v, err %v; want a vacuum", live, dead, vacuumed, err)
	}
	stats("after the vacuum", func(_, dead, vacuums int64) bool { return vacuums >= 1 && dead < 1_000 })
	if vacuumed, live, dead, err := st.VacuumIfDead(ctx); err != nil || vacuumed {
		t.Fatalf("just vacuumed, with %d live and %d dead tuples: vacuumed %v, err %v; want none", live, dead, vacuumed, err)
	}
}

// Only worker 0's store, the one opened with a classifier, runs the vacuum loop, and Close
// stops it: a node's other workers, and tools that open the store, never vacuum.
func TestOnlyWorkerZerosStoreRunsTheVacuumLoop(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	plain := openStore(t, dsn, &pgstore.Options{Shards: 4})
	if pgstore.VacuumLoopRunningForTest(plain) {
		t.Fatal("a store opened without a classifier runs the vacuum loop")
	}
	w0 := openClassified(t, dsn, storetest.Classifier{})
	if !pgstore.VacuumLoopRunningForTest(w0) {
		t.Fatal("worker 0's store (opened with a classifier) runs no vacuum loop")
	}
	if err := w0.Close(); err != nil {
		t.Fatal(err)
	}
	if pgstore.VacuumLoopRunningForTest(w0) {
		t.Fatal("the vacuum loop still runs after Close")
	}
}
