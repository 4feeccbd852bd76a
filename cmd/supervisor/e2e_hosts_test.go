package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Politeness end to end: a local origin, the real supervisor and workers rendering
// it with the http renderer. The origin records every request — when it arrived, what it
// answered — and how many it served at once; the tests judge the node by what the origin saw.

// originHit is one request the origin served.
type originHit struct {
	path     string
	arrived  time.Time
	code     int
	inFlight int       // the requests the origin was serving once this one arrived, itself included
	left     time.Time // when the origin had answered it; zero while it is in flight
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

func newHostOrigin(t testing.TB, hold time.Duration, decide func(o *hostOrigin, arrived time.Time) (int, string)) *hostOrigin {
	o := &hostOrigin{hold: hold, decide: decide, refused: make(chan struct{})}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		o.mu.Lock()
		o.inFlight++
		o.maxInFlight = max(o.maxInFlight, o.inFlight)
		code, ra := o.decide(o, arrived)
		o.hits = append(o.hits, originHit{path: r.URL.Path, arrived: arrived, code: code, inFlight: o.inFlight})
		hit := len(o.hits) - 1
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
		o.hits[hit].left = time.Now()
		if code == http.StatusTooManyRequests && o.firstRefuse.IsZero() {
			o.firstRefuse = time.Now()
			close(o.refused)
		}
		o.mu.Unlock()
	}))
	t.Cleanup(o.Close)
	return o
}

// host is the origin's site, the unit politeness keeps: render.domains lists 127.0.0.1 (see
// hostsYAML), so every port of the address is that one site.
func (o *hostOrigin) host() string { return o.Listener.Addr().(*net.TCPAddr).IP.String() }

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

// queueHost reads /v1/queue and returns host's row, if the host table holds it.
func (n *node) queueHost(host string) (wire.QueueHost, bool) {
	resp, err := http.Get("http://" + n.addr + "/v1/queue")
	if err != nil {
		return wire.QueueHost{}, false
	}
	defer resp.Body.Close()
	var q wire.QueueView
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || json.Unmarshal(b, &q) != nil {
		return wire.QueueHost{}, false
	}
	for _, h := range q.Hosts {
		if h.Host == host {
			return h, true
		}
	}
	return wire.QueueHost{}, false
}

// explain reads GET /v1/targets for u on the desktop device.
func (n *node) explain(u string) (wire.Explanation, int) {
	n.t.Helper()
	resp, err := http.Get("http://" + n.addr + "/v1/targets?device=desktop&url=" + url.QueryEscape(u))
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	var e wire.Explanation
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &e); err != nil {
			n.t.Fatalf("explain %s: %v: %s", u, err, b)
		}
	}
	return e, resp.StatusCode
}

// The politeness scenario, first case. 200 targets of one local origin, 2 render workers of 8 renders
// each (the host's default limit, 4, binds). The origin answers its first 30 requests 200, then
// 429 with Retry-After: 2 to every request arriving within a second of its first 429 (at T),
// then 200 again. Once /v1/queue shows the host paused (at K, polled every 5 ms), no render
// reaches the origin before T + 2 s but those already in flight at K — granted before the pause
// was known, and counted by /v1/queue's in_flight, the host tokens held. No page refused with
// a 429 gets a strike: its row is untouched (no failure, no seal, its due time as seeded,
// never rendered). Renders resume after the pause, and every page renders.
//
// The tolerance is 100 ms: the pause counts from worker 0's clock when it applies the 429
// (later than T, as the origin answered first) or at the earliest from the render's start,
// which is before T by the time the local origin takes to answer (its hold, 10 ms, plus the
// loopback); every process reads the same wall clock (the test's clock offset is 0).
func TestEndToEndHostRetryAfterPause(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	const targets, okFirst, tolerance = 200, 30, 100 * time.Millisecond
	o := newHostOrigin(t, 10*time.Millisecond, func(o *hostOrigin, arrived time.Time) (int, string) {
		switch {
		case len(o.hits) < okFirst:
			return http.StatusOK, ""
		case o.firstRefuse.IsZero() || arrived.Before(o.firstRefuse.Add(time.Second)):
			return http.StatusTooManyRequests, "2"
		}
		return http.StatusOK, ""
	})
	dir := t.TempDir()
	urls, due := seedOrigin(t, dir, o.URL, targets)
	n := startNode(t, dir, 3, hostsYAML(""), "")
	waitReady(t, n)

	select {
	case <-o.refused:
	case <-time.After(60 * time.Second):
		t.Fatalf("the origin answered no 429 (%d requests)", len(o.snapshot()))
	}
	o.mu.Lock()
	T := o.firstRefuse
	o.mu.Unlock()
	var h wire.QueueHost
	var ok bool
	for {
		if h, ok = n.queueHost(o.host()); ok && h.Paused {
			break
		}
		if time.Since(T) > 1500*time.Millisecond {
			t.Fatalf("the host was not shown paused within 1.5 s of the first 429 (%v %+v)", ok, h)
		}
		time.Sleep(5 * time.Millisecond)
	}
	K := time.Now()
	if h.PausedUntilMs < T.Add(2*time.Second-tolerance).UnixMilli() || h.Cause != "retry_after" || h.Status != http.StatusTooManyRequests {
		t.Fatalf("the host's pause: %+v, want retry_after 429 until at least %d (T + 2 s)", h, T.Add(2*time.Second).UnixMilli())
	}

	// The metrics show the pause too (the pause lasts 2 s; the scrape reads shared memory).
	if m := n.metrics(); m[`freshq_host_paused{host="`+o.host()+`"}`] != 1 && time.Now().Before(T.Add(2*time.Second)) {
		t.Fatalf("freshq_host_paused for %s during the pause: %v", o.host(), m[`freshq_host_paused{host="`+o.host()+`"}`])
	}

	// No strike: every page refused so far is left as it was once its lease is given back.
	var refusedPaths []string
	for _, hit := range o.snapshot() {
		if hit.code == http.StatusTooManyRequests && hit.arrived.Before(K) {
			refusedPaths = append(refusedPaths, hit.path)
		}
	}
	checked := 0
	for _, p := range refusedPaths {
		u := o.URL + p
		var e wire.Explanation
		waitFor(t, "the lease of "+p+" given back", 10*time.Second, func() bool {
			var code int
			e, code = n.explain(u)
			return code == http.StatusOK && (e.Lease == nil || e.Lease.Released)
		})
		if e.Failures != nil && e.Failures.Count > 0 || e.Terminal != nil || e.DueAt.UnixMilli() != due[u] || e.LastRender != nil {
			if time.Now().After(T.Add(2 * time.Second)) {
				continue // the pause may have ended and the page rendered since: no longer the 429's row
			}
			t.Fatalf("%s after its 429: failures %+v, terminal %+v, due %d (seeded %d), last render %+v: want the row untouched",
				p, e.Failures, e.Terminal, e.DueAt.UnixMilli(), due[u], e.LastRender)
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("no refused page checked (%d refused before K)", len(refusedPaths))
	}

	// Renders resume: the origin sees requests again, after the pause.
	waitFor(t, "renders after the pause", 30*time.Second, func() bool {
		for _, hit := range o.snapshot() {
			if hit.arrived.After(T.Add(2 * time.Second)) {
				return true
			}
		}
		return false
	})
	early, resumed := 0, time.Time{}
	for _, hit := range o.snapshot() {
		switch {
		case hit.arrived.Before(K):
		case hit.arrived.Before(T.Add(2*time.Second - tolerance)):
			early++
		case resumed.IsZero() || hit.arrived.Before(resumed):
			resumed = hit.arrived
		}
	}
	if early > h.InFlight {
		t.Fatalf("%d requests reached the origin between K (%v after T) and T + 2 s, with %d renders in flight at K", early, K.Sub(T), h.InFlight)
	}
	waitFor(t, "every page rendered", 60*time.Second, func() bool { return o.okPaths() == targets })
	for _, u := range urls {
		if e, code := n.explain(u); code != http.StatusOK || e.Failures != nil && e.Failures.Count > 0 || e.Terminal != nil {
			t.Fatalf("%s at the end: %d, failures %+v, terminal %+v", u, code, e.Failures, e.Terminal)
		}
	}
	hits := o.snapshot()
	refused := 0
	for _, hit := range hits {
		if hit.code == http.StatusTooManyRequests {
			refused++
		}
	}
	m := n.metrics()
	t.Logf("Retry-After pause: %d requests, %d answered 429; paused at K = T + %v, until T + %v; %d requests in [K, T+2s−%v) (%d in flight at K); "+
		"the next at T + %v; %d refused pages checked untouched; takes refused for the host: %v",
		len(hits), refused, K.Sub(T).Round(time.Millisecond), time.UnixMilli(h.PausedUntilMs).Sub(T).Round(time.Millisecond),
		early, tolerance, h.InFlight, resumed.Sub(T).Round(time.Millisecond), checked, m[`freshq_render_refused_total{cause="host"}`])
}

// The politeness scenario, second case: 3 render workers of 8 renders each, render.hosts.max_concurrency
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
