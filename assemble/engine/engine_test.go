package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/assemble/engine"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, yaml string) (store.Store, bool) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	st, eng, err := engine.Open(context.Background(), cfg, engine.Deps{Floor: store.NewMemFloor(0), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, eng != nil
}

// The embedded store is alone: it offers no cluster capability.
func TestOpenBadgerOffersNoCluster(t *testing.T) {
	if _, cluster := open(t, fmt.Sprintf("data_dir: %q\n", t.TempDir())); cluster {
		t.Fatal("Badger offered a cluster capability")
	}
}

// On PostgreSQL every node is a node of a cluster: the store comes with its capability.
func TestOpenPostgresOffersTheCluster(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	st, cluster := open(t, fmt.Sprintf("data_dir: %q\nstore: {backend: postgres, postgres: {dsn: %q, shards: 8}}\n", t.TempDir(), dsn))
	if !cluster {
		t.Fatal("PostgreSQL offered no cluster capability")
	}
	if _, err := st.GetSchedule([]byte("desktop|https://example.test/")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a read of the store opened: %v, want ErrNotFound", err)
	}
}
