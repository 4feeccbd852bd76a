package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/pgstore/pgschema"
	"github.com/freshq/freshq/testkit/pgtest"
)

func schemaVersion(t testing.TB, db *pgxpool.Pool) int {
	t.Helper()
	var v int
	if err := db.QueryRow(context.Background(), `SELECT value FROM freshq_meta WHERE name = 'schema_version'`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func count(t testing.TB, db *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A fresh database is migrated to pgschema.Version with S floor rows; reopening it changes
// nothing, keeps its rows, and keeps the S it was created with whatever Options.Shards says.
func TestMigrateFreshThenReopen(t *testing.T) {
	if pgschema.Version() < 1 {
		t.Fatalf("pgschema.Version %d: no migrations embedded", pgschema.Version())
	}
	dsn := pgtest.NewDatabase(t)
	db := rawPool(t, dsn)
	st, err := pgstore.Open(context.Background(), dsn, &pgstore.Options{Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	if v := schemaVersion(t, db); v != pgschema.Version() || st.Shards() != 8 || count(t, db, "freshq_floor") != 8 {
		t.Fatalf("fresh: version %d (want %d), shards %d, %d floor rows", v, pgschema.Version(), st.Shards(), count(t, db, "freshq_floor"))
	}
	sch, _ := store.NewSchedule([]byte("k"), 5, false, 0, store.Lanes{})
	if err := st.WriteSchedule(sch); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, dsn, &pgstore.Options{Shards: 64})
	if v := schemaVersion(t, db); v != pgschema.Version() || st.Shards() != 8 || count(t, db, "freshq_floor") != 8 {
		t.Fatalf("reopened: version %d, shards %d, %d floor rows", v, st.Shards(), count(t, db, "freshq_floor"))
	}
	if r, err := st.GetSchedule([]byte("k")); err != nil || r.DueAtMs != 5 {
		t.Fatalf("row after reopen: %+v %v", r, err)
	}
}

// A database migrated by a newer binary is refused, and left as it is.
func TestSchemaTooNewIsRefused(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	db := rawPool(t, dsn)
	st := openStore(t, dsn, nil)
	_ = st.Close()
	newer := pgschema.Version() + 1
	if _, err := db.Exec(context.Background(), `UPDATE freshq_meta SET value = $1 WHERE name = 'schema_version'`, newer); err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.Open(context.Background(), dsn, nil)
	if !errors.Is(err, pgschema.ErrTooNew) {
		if err == nil {
			_ = st.Close()
		}
		t.Fatalf("open of a schema at version %d: %v, want pgschema.ErrTooNew", newer, err)
	}
	if v := schemaVersion(t, db); v != newer {
		t.Fatalf("the refused open changed the version to %d", v)
	}
}

// Two nodes starting at once on a fresh database both open it, and it is migrated once.
func TestConcurrentOpensOfAFreshDatabase(t *testing.T) {
	for range 5 { // the race is in the first statements of Open: try it a few times
		dsn := pgtest.NewDatabase(t)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() {
				st, err := pgstore.Open(context.Background(), dsn, &pgstore.Options{Shards: 4})
				if err == nil {
					err = st.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent opens: %v", err)
		}
		db := rawPool(t, dsn)
		if v, n := schemaVersion(t, db), count(t, db, "freshq_floor"); v != pgschema.Version() || n != 4 {
			t.Fatalf("after concurrent opens: version %d, %d floor rows", v, n)
		}
	}
}
