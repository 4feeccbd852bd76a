package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/pgstore/pgschema"
	"github.com/freshq/freshq/store/storetest"
	"github.com/freshq/freshq/testkit/pgtest"
)

// The capacity recount's read (ForEachOwnedRow, outside the store contract) gives a row's
// rank interval as filed, and 0 once a write without one replaces it.
func TestForEachOwnedRowCarriesRankInterval(t *testing.T) {
	st := openStore(t, pgtest.NewDatabase(t), &pgstore.Options{Shards: 4})
	sch, _ := store.NewSchedule([]byte("k"), 1_000, true, 60_000, store.Lanes{})
	ranked, err := sch.WithRankInterval(900_000)
	if err != nil {
		t.Fatal(err)
	}
	owned := func() store.Row {
		t.Helper()
		var got []store.Row
		if _, err := st.ForEachOwnedRow(context.Background(), func(_ []byte, r store.Row, _ *store.Target) error {
			got = append(got, r)
			return nil
		}); err != nil || len(got) != 1 {
			t.Fatalf("owned rows %+v, %v", got, err)
		}
		return got[0]
	}
	if err := st.WriteSchedule(ranked); err != nil {
		t.Fatal(err)
	}
	if r := owned(); r != ranked.Row() {
		t.Fatalf("owned row %+v, want %+v", r, ranked.Row())
	}
	if err := st.WriteSchedule(sch); err != nil {
		t.Fatal(err)
	}
	if r := owned(); r != sch.Row() {
		t.Fatalf("owned row after a write without a rank interval %+v, want %+v", r, sch.Row())
	}
}

// A database at schema version 4 (before the rank interval, the class index and the farm's
// confirmations) migrates to the current version: its rows read back with rank interval 0, the
// column refuses a negative one, the due index carries the column, and a ranked write then
// reads back; its rows are unclassified until a store with a classifier reclassifies them.
func TestMigrateFromVersion4(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	db := rawPool(t, dsn)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, dsn, &pgstore.Options{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to version 4 as 0001 and 0005 leave it, with a row of that version.
	for _, q := range []string{
		`DROP TABLE freshq_farm_confirm`,
		`DROP INDEX freshq_schedule_class`,
		`ALTER TABLE freshq_schedule DROP COLUMN class`,
		`DELETE FROM freshq_meta WHERE name IN ('class_epoch', 'class_fingerprint')`,
		`DROP INDEX freshq_schedule_due`,
		`ALTER TABLE freshq_schedule DROP COLUMN rank_interval_ms`,
		`CREATE INDEX freshq_schedule_due ON freshq_schedule (shard, due_at_ms)
			INCLUDE (cache_key, flags, effective_interval_ms, stored_interval_ms)`,
		`UPDATE freshq_meta SET value = 4 WHERE name = 'schema_version'`,
		`INSERT INTO freshq_schedule (cache_key, shard, due_at_ms, flags, effective_interval_ms, stored_interval_ms)
			VALUES ('old', 0, 500, 1, 60000, 7)`,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if pgschema.Version() != 7 {
		t.Fatalf("pgschema.Version %d: this test undoes versions 5, 6 and 7 only", pgschema.Version())
	}

	st = openStore(t, dsn, &pgstore.Options{Shards: 4})
	if v := schemaVersion(t, db); v != pgschema.Version() {
		t.Fatalf("version %d after the migration, want %d", v, pgschema.Version())
	}
	want := store.Row{DueAtMs: 500, Projection: store.Projection{Submitted: true, EffectiveIntervalMs: 60_000, StoredIntervalMs: 7}}
	if r, err := st.GetSchedule([]byte("old")); err != nil || r != want {
		t.Fatalf("row of version 4: %+v, %v; want %+v", r, err, want)
	}
	if _, err := db.Exec(ctx, `UPDATE freshq_schedule SET rank_interval_ms = -1`); err == nil {
		t.Fatal("the column took a negative rank interval")
	}
	var def string
	if err := db.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE indexname = 'freshq_schedule_due'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "rank_interval_ms") || !strings.Contains(def, "stored_interval_ms") {
		t.Fatalf("due index %q does not carry every column a sweep reads", def)
	}
	sch, _ := store.NewSchedule([]byte("old"), 600, true, 60_000, store.Lanes{})
	if sch, err = sch.WithRankInterval(42); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteSchedule(sch); err != nil {
		t.Fatal(err)
	}
	want.DueAtMs, want.RankIntervalMs = 600, 42
	if r, err := st.GetSchedule([]byte("old")); err != nil || r != want {
		t.Fatalf("ranked row after the migration: %+v, %v; want %+v", r, err, want)
	}
	if err := db.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE indexname = 'freshq_schedule_class'`).Scan(&def); err != nil ||
		!strings.Contains(def, "(class, due_at_ms, cache_key)") || !strings.Contains(def, "rank_interval_ms") {
		t.Fatalf("class index %q (%v): want (class, due, key) carrying every column a sweep reads", def, err)
	}

	cst := openClassified(t, dsn, storetest.Classifier{})
	verifyClasses(t, cst, 0)
	if n, err := cst.Reclassify(ctx); err != nil || n != 1 {
		t.Fatalf("reclassify moved %d rows (%v), want the old row", n, err)
	}
	verifyClasses(t, cst, 1)
}
