package pgcluster_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/pgstore/pgcluster"
	"github.com/freshq/freshq/testkit/pgtest"
)

// TestMain stops the PostgreSQL cluster the binary started for its tests, if it started one
// (testkit/pgtest: without FRESHQ_TEST_PG_DSN, the first test that needs a database starts it).
func TestMain(m *testing.M) { pgtest.Main(m) }

// A Cluster is the cluster capability package cluster asks of an engine.
var _ cluster.Engine = (*pgcluster.Cluster)(nil)

const clusterShards = 16

// openCluster opens a store on dsn with o, closed at the end of the test, and returns its
// cluster capability with co.
func openCluster(t testing.TB, dsn string, o *pgstore.Options, co *pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	st, err := pgstore.Open(context.Background(), dsn, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return pgcluster.New(st, co)
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
