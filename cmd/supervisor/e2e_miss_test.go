package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// waitAnswer is one POST /v1/pages?wait= answer, with how long it took.
type waitAnswer struct {
	code       int
	retryAfter string
	body       string
	took       time.Duration
}

// getWaiting sends POST /v1/pages?url=u&wait=wait to the node (render on miss writes: a POST).
func (n *node) getWaiting(client *http.Client, u, wait string) waitAnswer {
	start := time.Now()
	resp, err := client.Post("http://"+n.addr+"/v1/pages?url="+url.QueryEscape(u)+"&wait="+wait, "", nil)
	if err != nil {
		return waitAnswer{code: -1, body: err.Error(), took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return waitAnswer{resp.StatusCode, resp.Header.Get("Retry-After"), string(b), time.Since(start)}
}

// getWaitingMany sends k of them at once; the answers arrive on the channel.
func (n *node) getWaitingMany(client *http.Client, u, wait string, k int) chan waitAnswer {
	out := make(chan waitAnswer, k)
	for range k {
		go func() { out <- n.getWaiting(client, u, wait) }()
	}
	return out
}

// slowOrigin serves a page after at least a second, and only once the test lets it go
// (release): each hit is counted, and the page names the hit it answers.
type slowOrigin struct {
	*httptest.Server
	hits    atomic.Int64
	release chan struct{}
	once    sync.Once
}

func newSlowOrigin(t *testing.T) *slowOrigin {
	o := &slowOrigin{release: make(chan struct{})}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit := o.hits.Add(1)
		time.Sleep(time.Second) // the origin's latency; the test does not sleep
		<-o.release
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!doctype html><p>%s, hit %d</p>", r.URL.Path, hit)
	}))
	t.Cleanup(func() { o.letGo(); o.Close() })
	return o
}

func (o *slowOrigin) letGo() { o.once.Do(func() { close(o.release) }) }

// missYAML configures a node whose render worker fetches the local origin (render.domains
// lists its address, which the address policy refuses otherwise) and whose waiting requests
// are capped at 100, all of which one site may hold.
const missYAML = `queue: {ready: {sweep_interval: 1s}}
page: {max_waiters: 100, max_site_waiters: 100, max_wait: 30s}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: http
  timeout: 20s
  domains: ["127.0.0.1"]
`

// waiters is the node's freshq_render_on_miss_waiters gauge (-1 while unreadable).
func (n *node) waiters() float64 {
	if v, ok := n.metrics()["freshq_render_on_miss_waiters"]; ok {
		return v
	}
	return -1
}

// Render on miss under a crowd: 100 concurrent requests with wait for one unknown URL, against an
// origin that takes at least a second, are answered with one page from one render: exactly one
// hit at the origin. A request past page.max_waiters, sent while they wait, gets 503 with
// Retry-After at once.
func TestEndToEndRenderOnMiss(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSlowOrigin(t)
	n := startNode(t, t.TempDir(), 2, missYAML, "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	page := origin.URL + "/p/unknown"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}

	answers := n.getWaitingMany(client, page, "20s", 100)
	waitFor(t, "100 waiters", 20*time.Second, func() bool { return n.waiters() == 100 })
	if f := n.metrics()["freshq_render_on_miss_flights"]; f != 1 {
		t.Fatalf("%v renders on miss in flight for one page, want 1", f)
	}
	waitFor(t, "the render at the origin", 20*time.Second, func() bool { return origin.hits.Load() == 1 })

	past := n.getWaiting(client, page, "20s")
	if past.code != http.StatusServiceUnavailable || past.retryAfter != "1" {
		t.Fatalf("the 101st request: %d Retry-After %q %s, want 503 with Retry-After 1", past.code, past.retryAfter, past.body)
	}
	if past.took > time.Second {
		t.Errorf("the 101st request was refused after %v, not at once", past.took)
	}
	origin.letGo()

	var took []time.Duration
	want := "<!doctype html><p>/p/unknown, hit 1</p>"
	for range 100 {
		a := <-answers
		if a.code != http.StatusOK || a.body != want {
			t.Fatalf("a waiter: %d %q, want 200 %q", a.code, a.body, want)
		}
		took = append(took, a.took)
	}
	if h := origin.hits.Load(); h != 1 {
		t.Fatalf("%d hits at the origin, want exactly 1", h)
	}
	if w := n.waiters(); w != 0 {
		t.Fatalf("%v waiters after every answer", w)
	}
	// The page is served from the store now, without a render.
	if a := n.getWaiting(client, page, "1s"); a.code != http.StatusOK || a.body != want || origin.hits.Load() != 1 {
		t.Fatalf("after the render: %d %q, %d hits", a.code, a.body, origin.hits.Load())
	}
	slices.Sort(took)
	// Woken by the render, not by the end of their wait (20 s), when a wait's last read of
	// the store would find the page too.
	if took[99] > 10*time.Second {
		t.Fatalf("the slowest waiter took %v: it was not woken by the render", took[99])
	}
	t.Logf("render on miss: 100 waiters, 1 origin hit; latency min %v, median %v, p95 %v, max %v; the 101st refused in %v",
		took[0], took[49], took[94], took[99], past.took)
}

// Requests waiting for a render on miss when the pool stops are answered 503 with Retry-After
// at once, not left hanging until their wait runs out (30 s here), and the supervisor exits 0.
func TestEndToEndStopAnswersRenderOnMissWaiters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSlowOrigin(t) // never let go: the render is still in flight at the stop
	n := startNode(t, t.TempDir(), 2, missYAML, "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	answers := n.getWaitingMany(client, origin.URL+"/p/held", "30s", 5)
	waitFor(t, "5 waiters", 20*time.Second, func() bool { return n.waiters() == 5 })
	waitFor(t, "the render at the origin", 20*time.Second, func() bool { return origin.hits.Load() == 1 })

	stopped := time.Now()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	for range 5 {
		a := <-answers
		if a.code != http.StatusServiceUnavailable || a.retryAfter != "1" {
			t.Fatalf("a waiter at the stop: %d Retry-After %q %s, want 503 with Retry-After 1", a.code, a.retryAfter, a.body)
		}
		slowest = max(slowest, time.Since(stopped))
	}
	if slowest > 2*time.Second {
		t.Fatalf("the waiters were answered %v after SIGTERM, not at once", slowest)
	}
	origin.letGo()
	select {
	case err := <-n.exited:
		if err != nil {
			t.Fatalf("supervisor: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor did not exit")
	}
	t.Logf("stop: 5 waiters answered 503 within %v of SIGTERM", slowest)
}
