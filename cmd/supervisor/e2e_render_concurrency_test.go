package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A chrome node without render.concurrency derives it from the cores its processes may use and
// says so: with GOMAXPROCS=3 handed to the real supervisor (and so to its workers), each of the
// two render workers logs 5 pages a core × 3 cores ÷ 2 render workers = 7 (rounded down), and starts 7 render
// loops. The cores are the environment's, never this machine's.
func TestEndToEndChromeConcurrencyDerivedFromTheCores(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	t.Setenv("GOMAXPROCS", "3")                             // inherited by the supervisor and its workers (startNode passes os.Environ)
	dir := filepath.Join(t.TempDir(), "render-concurrency") // the segment is named after it: unique to this test
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, dir, 3, "render: {renderer: chrome, domains: [127.0.0.1]}\n", "")
	waitFor(t, "ready", 60*time.Second, n.ready)
	waitFor(t, "two render workers logging their derived concurrency", 30*time.Second, func() bool {
		return n.logLines(`"render_concurrency":7,"derived":true,"cores":3,"render_workers":2,"renderer":"chrome"`, `"message":"render concurrency"`) == 2
	})
	waitFor(t, "two render workers started with 7 loops each", 30*time.Second, func() bool {
		return n.logLines(`"concurrency":7,"renderer":"chrome"`, `"message":"render worker started"`) == 2
	})
}
