package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/store"
)

// Politeness end to end (issue 18): a local origin, the real supervisor and workers rendering
// it with the http renderer. The origin records every request — when it arrived, what it
// answered — and how many it served at once; the tests judge the node by what the origin saw.

// originHit is one request the origin served.
type originHit struct {
	path    string
	arrived time.Time
	code    int
}

// hostOrigin is a local origin that holds each request for hold, answers it as decide says,
// and counts the requests it serves at once.
type hostOrigin struct {
	*httptest.Server
	hold   time.Duration
	decide func(o *hostOrigin, arrived time.Time) (code int, retryAfter string) // called under mu

	mu          sync.Mutex
	hits        []originHit
	inFlight    int
	maxInFlight int
	firstRefuse time.Time // when the first 429 was answered
	refused     chan struct{}
}

func newHostOrigin(t *testing.T, hold time.Duration, decide func(o *hostOrigin, arrived time.Time) (int, string)) *hostOrigin {
	o := &hostOrigin{hold: hold, decide: decide, refused: make(chan struct{})}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		o.mu.Lock()
		o.inFlight++
		o.maxInFlight = max(o.maxInFlight, o.inFlight)
		code, ra := o.decide(o, arrived)
		o.hits = append(o.hits, originHit{path: r.URL.Path, arrived: arrived, code: code})
		o.mu.Unlock()

		time.Sleep(o.hold) // the origin's latency, while the request counts as in flight
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(code)
		fmt.Fprintf(w, "<!doctype html><p>%s: %d</p>", r.URL.Path, code)

		o.mu.Lock()
		o.inFlight--
		if code == http.StatusTooManyRequests && o.firstRefuse.IsZero() {
			o.firstRefuse = time.Now()
			close(o.refused)
		}
		o.mu.Unlock()
	}))
	t.Cleanup(o.Close)
	return o
}

// snapshot copies the hits so far.
func (o *hostOrigin) snapshot() []originHit {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.hits)
}

// okPaths counts the distinct paths answered 200.
func (o *hostOrigin) okPaths() int {
	seen := map[string]bool{}
	for _, h := range o.snapshot() {
		if h.code == http.StatusOK {
			seen[h.path] = true
		}
	}
	return len(seen)
}

// seedOrigin files n targets of the origin, all due (the i-th i seconds ago), into the Badger
// store of dataDir before the supervisor starts; it returns their URLs and due times.
func seedOrigin(t *testing.T, dataDir, origin string, n int) (urls []string, due map[string]int64) {
	st := badgerIn(dataDir).open(t)
	defer st.Close()
	now := clock.NowMs()
	due = map[string]int64{}
	var ws []store.Write
	for i := range n {
		u := fmt.Sprintf("%s/c/item-%03d", origin, i)
		urls = append(urls, u)
		due[u] = now - int64(i)*1000
		sch, err := store.NewSchedule([]byte("desktop|"+u), due[u], true, 0, store.Lanes{NeverRendered: true})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, store.Write{Schedule: sch, Target: &store.Target{URL: u, Device: "desktop", Source: store.SourceSitemap}})
	}
	if err := st.WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
	return urls, due
}

// hostsYAML renders the local origin with the http renderer (render.domains lists its
// address, which the address policy refuses otherwise), extra added to the render section.
func hostsYAML(extra string) string {
	return `queue: {ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: http
  timeout: 20s
  concurrency: 8
  domains: ["127.0.0.1"]
` + extra
}

// Issue 18's second "done" case: 3 render workers of 8 renders each, render.hosts.max_concurrency
// 2, and 100 targets on one origin that holds each request 50 ms: the origin never serves more
// than 2 requests at once, does serve 2 at once (so the test can fail), and every page renders.
func TestEndToEndHostMaxConcurrency(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	const targets, maxConcurrency = 100, 2
	o := newHostOrigin(t, 50*time.Millisecond, func(*hostOrigin, time.Time) (int, string) { return http.StatusOK, "" })
	dir := t.TempDir()
	seedOrigin(t, dir, o.URL, targets)
	n := startNode(t, dir, 4, hostsYAML(fmt.Sprintf("  hosts: {max_concurrency: %d}\n", maxConcurrency)), "")
	waitReady(t, n)
	start := time.Now()
	waitFor(t, "every page rendered", 90*time.Second, func() bool { return o.okPaths() == targets })
	took := time.Since(start)
	o.mu.Lock()
	peak := o.maxInFlight
	o.mu.Unlock()
	if peak != maxConcurrency {
		t.Fatalf("the origin served up to %d requests at once, want exactly %d at the peak", peak, maxConcurrency)
	}
	t.Logf("max_concurrency %d: %d pages, at most %d requests at once at the origin, in %v; takes refused for the host: %v",
		maxConcurrency, targets, peak, took.Round(10*time.Millisecond), n.metrics()[`freshq_render_refused_total{cause="host"}`])
}
