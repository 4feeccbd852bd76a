package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/storetest"
	"github.com/freshq/freshq/testkit/pgtest"
)

// conformanceShards is S for the suite's databases: few enough that the interleaving test's
// keys share shards, so writes and advances meet on the same floor rows.
const conformanceShards = 16

// pgUnderTest is the PostgreSQL store with the suite's Backdoor, which reads and writes the
// tables directly.
type pgUnderTest struct {
	*pgstore.Store
	dsn string
	raw *pgxpool.Pool
}

func (p pgUnderTest) LoseRow(t testing.TB, cacheKey []byte) {
	t.Helper()
	tag, err := p.raw.Exec(context.Background(), `DELETE FROM freshq_schedule WHERE cache_key = $1`, cacheKey)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("lose the row of %q: %v %v", cacheKey, tag, err)
	}
}

// Floors: a row is bounded by its shard's floor.
func (p pgUnderTest) Floors(t testing.TB) func([]byte) int64 {
	t.Helper()
	floors := shardFloors(t, p.raw)
	return func(key []byte) int64 { return floors[pgstore.Shard(key, p.Shards())] }
}

// shardFloors reads every shard's floor from freshq_floor.
func shardFloors(t testing.TB, db *pgxpool.Pool) map[int32]int64 {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT shard, floor_ms FROM freshq_floor`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	floors := map[int32]int64{}
	for rows.Next() {
		var shard int32
		var floor int64
		if err := rows.Scan(&shard, &floor); err != nil {
			t.Fatal(err)
		}
		floors[shard] = floor
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return floors
}

func openPG(t testing.TB, o storetest.Options) store.Store {
	t.Helper()
	return openPGWith(t, o, nil)
}

func openPGClassified(t testing.TB, o storetest.Options) store.Store {
	t.Helper()
	return openPGWith(t, o, storetest.Classifier{})
}

func openPGWith(t testing.TB, o storetest.Options, c store.Classifier) store.Store {
	t.Helper()
	var dsn string
	if o.Reopen != nil {
		dsn = o.Reopen.(pgUnderTest).dsn
	} else {
		dsn = pgtest.NewDatabase(t)
	}
	st := openStore(t, dsn, &pgstore.Options{Shards: conformanceShards, Floor: o.Floor,
		RefuseImplausibleDue: o.RefuseImplausibleDue, TestSignals: o.TestSignals, Classifier: c})
	return pgUnderTest{Store: st, dsn: dsn, raw: rawPool(t, dsn)}
}

// openStore opens a store on dsn, closed at the end of the test.
func openStore(t testing.TB, dsn string, o *pgstore.Options) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), dsn, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// rawPool connects to dsn for the test's own SQL, closed at the end of the test.
func rawPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	db, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

func TestConformance(t *testing.T) { storetest.Run(t, openPG) }

// The suite again on a store that keeps the class index: every write classes its row, every
// VerifyIndex checks the classes, and the floor interleavings run sweeps that read by class.
func TestConformanceClassIndex(t *testing.T) { storetest.Run(t, openPGClassified) }
