package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A render worker killed mid-render held slots of the host it was rendering. Its rows' leases
// lapse at their TTL (10 min here), but the host's slots are the node's: the restarted worker
// gives them back, and the host is rendered again at once, never above its limit.
func TestEndToEndKilledRenderWorkerGivesBackItsHostSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	// The origin holds each request until its client goes away or the test lets it go; it
	// counts the requests open at once and those that arrive after the kill.
	var (
		mu             sync.Mutex
		open, peak     int
		afterKill      int
		killed         bool
		release        = make(chan struct{})
		releaseOnce    sync.Once
		letGo          = func() { releaseOnce.Do(func() { close(release) }) }
		firstAfterKill = make(chan struct{}, 1)
	)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		open++
		peak = max(peak, open)
		if killed {
			afterKill++
			select {
			case firstAfterKill <- struct{}{}:
			default:
			}
		}
		mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-release:
		}
		mu.Lock()
		open--
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><p>ok</p>")
	}))
	t.Cleanup(origin.Close)
	t.Cleanup(letGo)

	dir := t.TempDir()
	seedOrigin(t, dir, origin.URL, 40)
	n := startNode(t, dir, 2, hostsYAML("  hosts: {max_concurrency: 2}\n"), "")
	waitReady(t, n)
	openNow := func() int { mu.Lock(); defer mu.Unlock(); return open }
	waitFor(t, "two renders open at the origin", 30*time.Second, func() bool { return openNow() == 2 })

	seg := n.segment()
	victim := workerPID(seg, 1)
	mu.Lock()
	killed = true
	mu.Unlock()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed connections closed at the origin", 10*time.Second, func() bool { return openNow() == 0 })
	waitFor(t, "worker 1's restart", 30*time.Second, func() bool {
		p := workerPID(seg, 1)
		return p != 0 && p != victim
	})
	select {
	case <-firstAfterKill:
	case <-time.After(15 * time.Second):
		t.Fatal("no render reached the host within 15 s of the restart: the dead worker's host slots are still held")
	}
	waitFor(t, "two renders open again", 15*time.Second, func() bool { return openNow() == 2 })
	letGo()
	mu.Lock()
	defer mu.Unlock()
	if peak > 2 {
		t.Fatalf("the origin had %d requests open at once, limit 2", peak)
	}
	t.Logf("after the kill: %d requests reached the origin; at most %d open at once", afterKill, peak)
}
