package pgstore_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/pgstore/pgcluster"
	"github.com/freshq/freshq/store/storetest"
	"github.com/freshq/freshq/testkit/pgtest"
)

func openClassified(t *testing.T, dsn string, c store.Classifier) *pgstore.Store {
	t.Helper()
	return openStore(t, dsn, &pgstore.Options{Shards: 4, Classifier: c, TestNoReclassifyLoop: true})
}

func classKey(i int) []byte { return fmt.Appendf(nil, "desktop|https://example.com/p/%04d", i) }

func writeRows(t *testing.T, st *pgstore.Store, from, n int, cadenceMs int64) {
	t.Helper()
	writeRowsDue(t, st, from, n, cadenceMs, 1_000)
}

// writeRowsDue files rows from..from+n-1 (keys classKey(i)), row i due at dueMs + i.
func writeRowsDue(t *testing.T, st *pgstore.Store, from, n int, cadenceMs, dueMs int64) {
	t.Helper()
	ws := make([]store.Write, 0, n)
	for i := from; i < from+n; i++ {
		sch, err := store.NewSchedule(classKey(i), dueMs+int64(i), i%3 == 0, cadenceMs, store.Lanes{Failing: i%7 == 0})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, store.Write{Schedule: sch})
	}
	if err := st.WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
}

// dueRows reads the due set at now through the due index; byClass reads it class by class,
// and ok is false when the pass offers no class index.
func dueRows(t *testing.T, st *pgstore.Store, now int64) map[string]store.Row {
	t.Helper()
	p, err := st.BeginPass(now)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := map[string]store.Row{}
	if err := p.IterateDue(0, 64, func(rows []store.DueRow) error {
		for _, r := range rows {
			got[string(r.Key)] = r.Row
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func byClass(t *testing.T, st *pgstore.Store, now int64) (rows map[string]store.Row, fp uint64, ok bool) {
	t.Helper()
	p, err := st.BeginPass(now)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cp := p.(store.ClassPass)
	if fp, ok = cp.ClassFingerprint(); !ok {
		return nil, 0, false
	}
	if _, _, err := cp.ReadHead(); err != nil {
		t.Fatal(err)
	}
	heads, err := cp.ClassHeads()
	if err != nil {
		t.Fatal(err)
	}
	rows = map[string]store.Row{}
	for _, h := range heads {
		rows[string(h.Key)] = h.Row
		last := h.DueRow
		for more := true; more; {
			var got []store.DueRow
			if got, more, err = cp.ReadClass(h.Class, last.DueAtMs, last.Key, 3, nil); err != nil {
				t.Fatal(err)
			}
			for _, r := range got {
				rows[string(r.Key)] = r.Row
				last = r
			}
		}
	}
	return rows, fp, true
}

func verifyClasses(t *testing.T, st *pgstore.Store, wantEntries int) {
	t.Helper()
	rep, err := st.VerifyIndex()
	if err != nil || !rep.OK() || rep.ClassEntries != wantEntries {
		t.Fatalf("verify: %+v, %v; want OK with %d class entries", rep, err, wantEntries)
	}
}

// A class epoch names one classifier. Rows filed before the store had one, or by a node of
// another configuration, are outside the node's epoch: its passes offer no class index (the
// sweep reads the whole due set) until the reclassifier has moved them, after which a class
// read gives exactly the due set. Only the node whose epoch is current moves rows.
func TestClassEpochs(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	const now = 1_000_000

	plain := openStore(t, dsn, &pgstore.Options{Shards: 4})
	writeRows(t, plain, 0, 120, 3_600_000)
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}

	a := openClassified(t, dsn, storetest.Classifier{})
	if _, _, ok := byClass(t, a, now); ok {
		t.Fatal("a pass offered the class index over rows filed without a classifier")
	}
	verifyClasses(t, a, 0)
	if n, err := a.Reclassify(ctx); err != nil || n != 120 {
		t.Fatalf("reclassify moved %d rows (%v), want 120", n, err)
	}
	got, fp, ok := byClass(t, a, now)
	if want := dueRows(t, a, now); !ok || fp != (storetest.Classifier{}).Fingerprint() || !maps.Equal(got, want) {
		t.Fatalf("class read: ok %v, fingerprint %x, %d rows; due read %d rows", ok, fp, len(got), len(want))
	}
	verifyClasses(t, a, 120)

	// A second node of another configuration takes the next epoch; the first keeps writing
	// under its own.
	b := openClassified(t, dsn, storetest.OtherClassifier{})
	writeRows(t, a, 120, 30, 86_400_000)
	if _, _, ok := byClass(t, b, now); ok {
		t.Fatal("a pass offered the class index over rows of another epoch")
	}
	if n, err := a.Reclassify(ctx); err != nil || n != 0 {
		t.Fatalf("the node of the old epoch reclassified %d rows (%v)", n, err)
	}
	if n, err := b.Reclassify(ctx); err != nil || n != 150 {
		t.Fatalf("the node of the current epoch reclassified %d rows (%v), want 150", n, err)
	}
	got, fp, ok = byClass(t, b, now)
	if want := dueRows(t, b, now); !ok || fp != (storetest.OtherClassifier{}).Fingerprint() || !maps.Equal(got, want) {
		t.Fatalf("class read after reclassifying: ok %v, fingerprint %x, %d rows; due read %d rows", ok, fp, len(got), len(want))
	}
	verifyClasses(t, b, 150)
	if _, _, ok := byClass(t, a, now); ok {
		t.Fatal("the node of the old epoch read rows of the new one by class")
	}

	// Reopened with the first configuration, a node takes a new epoch rather than the old one's.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a2 := openClassified(t, dsn, storetest.Classifier{})
	if n, err := a2.Reclassify(ctx); err != nil || n != 150 {
		t.Fatalf("reclassify after reopening moved %d rows (%v), want 150", n, err)
	}
	verifyClasses(t, a2, 150)
}

// The reclassifier vacuums the table after moving a large share of it, whose old index entries
// every pass's epoch check would otherwise walk, and leaves a small move to autovacuum: in a
// rolling change a node of the old configuration keeps writing, and the node of the new one
// moving those rows every minute must not vacuum the whole table every minute.
func TestReclassifyVacuumsAfterLargeMovesOnly(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	const rows = 20_000
	old := openClassified(t, dsn, storetest.OtherClassifier{})
	writeRows(t, old, 0, rows, 3_600_000)
	cur := openClassified(t, dsn, storetest.Classifier{})
	vacuums := func() int64 {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn) // a new session: no statistics cached from before
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int64
		if err := conn.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'freshq_schedule'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := vacuums()
	if n, err := cur.Reclassify(ctx); err != nil || n != rows {
		t.Fatalf("reclassify moved %d rows (%v), want %d", n, err, rows)
	}
	if v := vacuums(); v != before+1 {
		t.Fatalf("after moving every row: %d vacuums, want %d", v, before+1)
	}
	// The old node rewrites a tenth of the rows: a full batch, but under an eighth of the table.
	writeRows(t, old, 0, rows/10, 6*3_600_000)
	if n, err := cur.Reclassify(ctx); err != nil || n != rows/10 {
		t.Fatalf("reclassify moved %d rows (%v), want %d", n, err, rows/10)
	}
	if v := vacuums(); v != before+1 {
		t.Fatalf("after moving a tenth of the table: %d vacuums, want still %d", v, before+1)
	}
	verifyClasses(t, cur, rows)
}

// The reclassifier moves a row only if it is still as it read it: a write of a node of another
// epoch that changes the row's cadence between the read and the move keeps the row out of the
// epoch (a class computed from the old cadence would be wrong), and the next round moves it
// with the class of its new cadence.
func TestReclassifySkipsARowChangedMeanwhile(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	old := openClassified(t, dsn, storetest.OtherClassifier{})
	writeRows(t, old, 0, 10, 3_600_000)
	cur := openClassified(t, dsn, storetest.Classifier{})
	pgstore.SetBeforeReclassifyUpdateForTest(cur, func() {
		pgstore.SetBeforeReclassifyUpdateForTest(cur, nil)
		writeRows(t, old, 4, 1, 7*86_400_000) // key 4, another cadence, another class
	})
	if n, err := cur.Reclassify(ctx); err != nil || n != 9 {
		t.Fatalf("reclassify moved %d rows (%v), want the 9 unchanged", n, err)
	}
	verifyClasses(t, cur, 9)
	if n, err := cur.Reclassify(ctx); err != nil || n != 1 {
		t.Fatalf("the next round moved %d rows (%v), want the changed one", n, err)
	}
	verifyClasses(t, cur, 10)
}

// In a cluster a class read gives the rows of the shards the node holds, as its due read does:
// the class index spans every shard, and the rows of another node's shards are not the node's
// to publish.
func TestClassReadKeepsToTheNodesShards(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	a := openStore(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-a", Classifier: storetest.Classifier{}, TestNoReclassifyLoop: true})
	var shards []int32
	var epochs []int64
	for _, sh := range []int32{1, 4, 9} {
		e, ok, err := pgcluster.New(a, nil).Acquire(ctx, "node-a", sh, 0, time.Minute)
		if err != nil || !ok {
			t.Fatalf("acquire %d: %v %v", sh, ok, err)
		}
		shards, epochs = append(shards, sh), append(epochs, e)
	}
	if err := a.SetOwned(ctx, shards, epochs); err != nil {
		t.Fatal(err)
	}
	var ws []store.Write
	for sh := range int32(clusterShards) {
		for n := range 4 {
			sch, _ := store.NewSchedule(keyIn(t, sh, n), int64(1_000+n), n%2 == 0, 3_600_000, store.Lanes{})
			ws = append(ws, store.Write{Schedule: sch})
		}
	}
	if err := a.WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
	got, _, ok := byClass(t, a, 5_000)
	want := dueRows(t, a, 5_000)
	if !ok || len(want) != 12 || !maps.Equal(got, want) {
		t.Fatalf("class read (ok %v) %d rows, due read %d rows, want the 12 of the node's 3 shards", ok, len(got), len(want))
	}
}
