package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/node"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/wire"
)

// worker0Env is worker 0's environment in a temporary directory: its shared-memory segment,
// its block, a data directory and a control socket (under a short path: a unix socket's is
// bounded to about a hundred bytes).
func worker0Env(t *testing.T) *env {
	t.Helper()
	dir, err := os.MkdirTemp("", "w0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	seg, err := shm.Create(filepath.Join(dir, "seg"), shm.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	w, err := seg.Worker(0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = filepath.Join(dir, "data")
	e := &env{index: 0, log: zerolog.Nop(), seg: seg, worker: w, socketPath: filepath.Join(dir, "w0.sock")}
	if err := e.setConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

// Worker 0 starts and stops in-process: it serves its control socket once started, and its
// stop closes the socket and the store (which another open may then take), and may be called
// twice.
func TestWorker0StartsServesAndStops(t *testing.T) {
	e := worker0Env(t)
	var logged bytes.Buffer // warnings and errors: a clean stop, and a second one, log none
	e.log = zerolog.New(zerolog.SyncWriter(&logged)).Level(zerolog.WarnLevel)
	w := newNode(e)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatalf("a second Start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The control socket serves, and the sweep loop runs: its first sweep, at once, shows in
	// the status (waited for on a condition, not on time).
	client := wire.NewClient(e.socketPath)
	for {
		st, err := client.Status(ctx)
		if err != nil || !st.Serving {
			t.Fatalf("status over the control socket: %+v, %v", st, err)
		}
		if st.Sweeps+st.SweepFails > 0 {
			if st.SweepFails > 0 {
				t.Fatalf("the sweep failed: %+v", st)
			}
			break
		}
		runtime.Gosched()
	}
	stopped := make(chan struct{})
	go func() { w.Stop(); w.Stop(); close(stopped) }()
	within(t, "worker 0's stop", stopped)
	if logged.Len() > 0 {
		t.Fatalf("the stops logged:\n%s", logged.String())
	}
	if _, err := os.Stat(e.socketPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the control socket outlives the stop: %v", err)
	}
	// The store was closed: its directory's lock is free.
	reopened, err := badgerstore.Open(filepath.Join(e.cur.Load().Config().DataDir, "db"), &badgerstore.Options{Floor: e.seg.Floor()})
	if err != nil {
		t.Fatalf("the store was left open by the stop: %v", err)
	}
	reopened.Close()
	if err := w.Start(context.Background()); !errors.Is(err, node.ErrStopped) {
		t.Fatalf("Start after Stop: %v, want node.ErrStopped", err)
	}
}

// Stop without Start touches nothing; a Start that fails half-way is stopped by the same Stop.
func TestWorker0StopWithoutStart(t *testing.T) {
	e := worker0Env(t)
	newNode(e).Stop()
	if _, err := os.Stat(e.cur.Load().Config().DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a stop without a start made the data directory: %v", err)
	}

	// The socket cannot listen (its path is a directory that is not empty): Start fails after
	// opening the store, and Stop closes it.
	if err := os.MkdirAll(filepath.Join(e.socketPath, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	w := newNode(e)
	if err := w.Start(context.Background()); err == nil {
		t.Fatal("Start succeeded without its control socket")
	}
	w.Stop()
	reopened, err := badgerstore.Open(filepath.Join(e.cur.Load().Config().DataDir, "db"), &badgerstore.Options{Floor: e.seg.Floor()})
	if err != nil {
		t.Fatalf("a failed start's stop left the store open: %v", err)
	}
	reopened.Close()
}

func within(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second): // a failure's bound only: a passing run never waits for it
		t.Fatalf("%s did not happen", what)
	}
}
