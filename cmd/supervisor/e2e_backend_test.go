package main

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/testkit/pgtest"
)

// backend is the store a node runs on, as a test seeds it before the node starts and reads it
// back after the node stopped: its configuration section, and how the test opens it.
type backend struct {
	yaml string
	dsn  string // PostgreSQL's; empty for Badger
	open func(t testing.TB) store.Store
}

// badgerIn is the default backend: the Badger store under dataDir.
func badgerIn(dataDir string) backend {
	return backend{open: func(t testing.TB) store.Store {
		st, err := badgerstore.Open(filepath.Join(dataDir, "db"), &badgerstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}}
}

// postgresFor is a fresh PostgreSQL database (testkit/pgtest: skipped without a server,
// failed under CI).
func postgresFor(t testing.TB) backend {
	dsn := pgtest.NewDatabase(t)
	return backend{
		yaml: fmt.Sprintf("store: {backend: postgres, postgres: {dsn: %q}}\n", dsn),
		dsn:  dsn,
		open: func(t testing.TB) store.Store {
			st, err := pgstore.Open(context.Background(), dsn, nil)
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
}

// The end-to-end runs of the real processes, on PostgreSQL: kill -9 of a render worker and of
// worker 0 under load, then SIGTERM; every acknowledged write present, every target rendered,
// no row below the floor.
func TestEndToEndRendersEverythingThroughKillsOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	rendersEverythingThroughKills(t, dir, postgresFor(t))
}

func TestStopOnSIGTERMDrainsInOrderOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	stopWhileRenderingOn(t, dir, postgresFor(t), func(n *lnode) { n.cmd.Process.Signal(syscall.SIGTERM) })
}
