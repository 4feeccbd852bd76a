package node

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/testkit/timers"
	"github.com/rs/zerolog"
)

// fakeSitemaps stands in for sitemapruns.Runs: Stop returns at once, or, stuck, only once
// the test has ended (a run cut in its commit).
type fakeSitemaps struct {
	stuck   bool
	release chan struct{} // closed when the test ends
}

func (f fakeSitemaps) Start(context.Context) error { return nil }
func (f fakeSitemaps) Stop() {
	if f.stuck {
		<-f.release
	}
}

// stopRig is worker 0's control socket with one request in progress that returns only when the
// test lets it (a bulk upload in the middle of its commit, say).
type stopRig struct {
	stop     *workerStop
	asked    <-chan timers.Timer
	release  chan struct{}
	finished atomic.Bool // the request has returned
}

func newStopRig(t *testing.T, sitemaps fakeSitemaps) *stopRig {
	r := &stopRig{release: make(chan struct{})}
	// A stuck run is released when the test ends, not with the request: the test lets the
	// request return and keeps the run stuck.
	sitemapsDone := make(chan struct{})
	t.Cleanup(func() { close(sitemapsDone) })
	sitemaps.release = sitemapsDone
	entered := make(chan struct{})
	inflight := &handlers{}
	srv := &http.Server{Handler: inflight.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-r.release // deaf to its connection's end, as a commit under way is
		r.finished.Store(true)
	}))}
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "w0.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", ln.Addr().String())
	}}}
	go func() {
		if resp, err := client.Post("http://w0/v1/targets", "application/json", strings.NewReader("[]")); err == nil {
			resp.Body.Close()
		}
	}()
	timers.Within(t, "the request reaching its handler", entered)
	after, asked := timers.New()
	r.asked = asked
	r.stop = &workerStop{srv: srv, inflight: inflight, sitemaps: sitemaps, log: zerolog.Nop(), after: after, drain: 7 * time.Second}
	t.Cleanup(func() {
		select {
		case <-r.release:
		default:
			close(r.release)
		}
		srv.Close()
	})
	return r
}

func (r *stopRig) next(t *testing.T, want time.Duration) timers.Timer {
	t.Helper()
	select {
	case tm := <-r.asked:
		if tm.D != want {
			t.Fatalf("a bound of %v, want %v", tm.D, want)
		}
		return tm
	case <-time.After(10 * time.Second):
		t.Fatalf("the %v bound was not asked for", want)
		return timers.Timer{}
	}
}

// A request that outlives the control socket's drain bound is cut, and worker 0 waits for it
// to return before it may close the store: the store is never closed under a live writer.
func TestWorker0StoreOutlivesItsRequests(t *testing.T) {
	r := newStopRig(t, fakeSitemaps{})
	closeStore := make(chan bool, 1)
	go func() {
		ok := r.stop.run()
		if ok && !r.finished.Load() {
			t.Error("the store may be closed while a request still runs")
		}
		closeStore <- ok
	}()
	close(r.next(t, 7*time.Second).Fire) // the drain bound passes with the request running
	r.next(t, finishTimeout)             // the stop now waits for it, on a bound of its own
	select {
	case <-closeStore:
		t.Fatal("the stop ended while a request still ran")
	default:
	}
	close(r.release)
	select {
	case ok := <-closeStore:
		if !ok {
			t.Fatal("the request returned in time, yet the store is left open")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stop did not end once the request returned")
	}
}

// A request (or a sitemap run) still running past the stop's last bound: the store is left
// open rather than closed under it.
func TestWorker0LeavesTheStoreOpenUnderALiveWriter(t *testing.T) {
	for _, sitemaps := range []fakeSitemaps{{}, {stuck: true}} {
		r := newStopRig(t, sitemaps)
		if !sitemaps.stuck {
			defer close(r.release)
		} else {
			close(r.release) // only the sitemap run is stuck
		}
		closeStore := make(chan bool, 1)
		go func() { closeStore <- r.stop.run() }()
		close(r.next(t, 7*time.Second).Fire)
		close(r.next(t, finishTimeout).Fire)
		select {
		case ok := <-closeStore:
			if ok {
				t.Fatalf("stuck sitemaps %v: the store would be closed under a live writer", sitemaps.stuck)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the stop did not end at its last bound")
		}
	}
}
