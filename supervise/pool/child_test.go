package pool

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/shm"
)

// sleeperPool is a pool whose workers are a script that sleeps: real processes that a test
// can kill, with nothing of freshq in them.
func sleeperPool(t *testing.T, workers int) *Pool {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "worker.sh")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 600\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	seg, err := shm.Create(filepath.Join(dir, "seg"), shm.Options{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Supervisor
	set := Settings{DataDir: dir, SegmentPath: filepath.Join(dir, "seg"), RestartIntensity: cfg.RestartIntensity,
		RestartPeriod: cfg.RestartPeriod.D(), BackoffMin: time.Millisecond, BackoffMax: cfg.BackoffMax.D()}
	p, err := New(Options{Log: zerolog.Nop(), Segment: seg, Bin: bin, WorkerConfig: filepath.Join(dir, "w.yaml"),
		Socket: filepath.Join(dir, "w0.sock"), Settings: func() Settings { return set }, Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	restarts := newIntensity(100, time.Minute)
	for i := range workers {
		c := &child{index: i, p: p, restarts: restarts}
		p.children = append(p.children, c)
		c.start()
	}
	t.Cleanup(func() {
		p.closing.Store(true)
		p.stopping.Store(true)
		for _, c := range p.children {
			c.signal(syscall.SIGKILL)
			<-c.exited()
		}
		seg.Close()
	})
	return p
}

func (c *child) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0
	}
	return c.proc.Pid
}

// killAndWait kills the child's process and waits for the supervisor to see it exit.
func killAndWait(t *testing.T, c *child) {
	t.Helper()
	done := c.exited()
	c.signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("worker %d did not exit on SIGKILL", c.index)
	}
}

// While the render workers drain, their last results go to worker 0: a worker 0 that dies then
// is restarted, so that they are not all dropped. Once worker 0 is told to stop itself, nothing
// restarts, and a render worker never restarts once the stop began.
func TestWorker0IsRestartedWhileRenderWorkersDrain(t *testing.T) {
	p := sleeperPool(t, 2)
	w0, w1 := p.children[0], p.children[1]
	p.stopping.Store(true)

	killAndWait(t, w1)
	before := w0.pid()
	killAndWait(t, w0)
	waitFor(t, "worker 0's restart during the drain", 10*time.Second, func() bool {
		p := w0.pid()
		return p != 0 && p != before
	})
	// The gate every (re)start passes: closed to a render worker once the stop began, and to
	// worker 0 once it was told to stop.
	if w1.start(); w1.startCount() != 1 {
		t.Fatalf("a render worker was started during the stop (%d starts)", w1.startCount())
	}
	p.closing.Store(true)
	killAndWait(t, w0)
	if w0.start(); w0.startCount() != 2 {
		t.Fatalf("worker 0 was started after it was told to stop (%d starts)", w0.startCount())
	}
}

func (c *child) startCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.starts
}

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
