package api

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// missAPI is GET /v1/pages with render on miss over a test store. A wait ends only when the
// test closes timeout, never with the wall clock.
type missAPI struct {
	*qtest.Env
	srv     *httptest.Server
	misses  *misses.Flights
	applier *apply.Applier
	timeout chan time.Time
}

func newMissAPI(t *testing.T, yaml string) *missAPI {
	e := qtest.New(t, "render: {domains: [shop.test]}\n"+yaml, start, shm.Options{})
	n := &missAPI{Env: e, timeout: make(chan time.Time)}
	locks := &intake.KeyLocks{}
	targets := &Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}
	n.misses = &misses.Flights{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now}),
		Settings: qtest.Settings(e, MissesSettingsOf),
		After:    func(time.Duration) <-chan time.Time { return n.timeout }}
	n.applier = intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Seg: e.Seg, Locks: locks, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now, Misses: n.misses})
	mux := http.NewServeMux()
	(&Operate{Targets: targets.Targets, Misses: n.misses}).Register(mux)
	n.srv = httptest.NewServer(mux)
	t.Cleanup(n.srv.Close)
	t.Cleanup(n.misses.Stop) // runs first: a failed test leaves no request waiting on Close
	return n
}

type pageAnswer struct {
	code   int
	header http.Header
	body   string
}

// get asks for the page of query: a POST when it waits (render on miss writes), else a GET.
func (n *missAPI) get(query string) pageAnswer {
	method := http.MethodGet
	if strings.Contains(query, "wait=") {
		method = http.MethodPost
	}
	return n.send(method, query)
}

func (n *missAPI) send(method, query string) pageAnswer {
	req, _ := http.NewRequest(method, n.srv.URL+"/v1/pages?"+query, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return pageAnswer{code: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return pageAnswer{resp.StatusCode, resp.Header, string(b)}
}

// getAsync sends the request in the background; its answer arrives on the channel.
func (n *missAPI) getAsync(query string) chan pageAnswer {
	ch := make(chan pageAnswer, 1)
	go func() { ch <- n.get(query) }()
	return ch
}

// until polls until waiters requests wait on a started flight (not a wait for time to pass).
func (n *missAPI) until(t *testing.T, waiters int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if f, w := n.misses.Waiting(); f >= 1 && w == waiters {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %d waiters", waiters)
		}
		runtime.Gosched()
	}
}

func (n *missAPI) render(t *testing.T, key, outcome string, status int, body string) {
	t.Helper()
	l := intake.WireLease(n.Grant([]byte(key)))
	st, err := n.applier.Apply([]wire.Result{{Key: []byte(key), Outcome: outcome, Status: status, Body: []byte(body), Lease: l,
		Headers: map[string]string{"content-type": "text/html"}}})
	if err != nil || st.Applied != 1 {
		t.Fatalf("apply: %+v %v", st, err)
	}
}

// errorOf decodes a JSON error answer.
func errorOf(t *testing.T, a pageAnswer) wire.ErrorBody {
	t.Helper()
	var e wire.ErrorBody
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || e.Error == "" {
		t.Fatalf("%d %q: not a JSON error (%v)", a.code, a.body, err)
	}
	return e
}

const waitURL = "https://shop.test/p/w"

var waitQuery = "url=" + url.QueryEscape(waitURL)

// A bad ?wait= is a 400 naming wait; nothing is filed for it.
func TestPageWaitBadValueNamesWait(t *testing.T) {
	n := newMissAPI(t, "page: {max_wait: 20s}\n")
	for _, v := range []string{"", "abc", "10", "0s", "-1s", "21s", "1h", "99999999999999999999s", "1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s"} {
		a := n.get(waitQuery + "&wait=" + url.QueryEscape(v))
		if e := errorOf(t, a); a.code != 400 || e.Field != "wait" {
			t.Errorf("wait=%q: %d %+v", v, a.code, e)
		}
	}
	if _, err := n.Store.GetSchedule([]byte("desktop|" + waitURL)); err == nil {
		t.Fatal("a refused wait filed its target")
	}
	a := n.get(waitQuery + "&wait=20s&device=tv")
	if e := errorOf(t, a); a.code != 400 || e.Field != "device" {
		t.Errorf("unknown device: %d %+v", a.code, e)
	}
}

// Without wait the endpoint is what it was: a missing page is a 404 and nothing is filed.
func TestPageWithoutWaitIsUnchanged(t *testing.T) {
	n := newMissAPI(t, "")
	a := n.get(waitQuery)
	if e := errorOf(t, a); a.code != 404 || e.Field != "url" {
		t.Fatalf("%d %+v", a.code, e)
	}
	if _, err := n.Store.GetSchedule([]byte("desktop|" + waitURL)); err == nil {
		t.Fatal("a request without wait filed its target")
	}
}

// With wait, a missing page is rendered and answered with its headers; requests that arrive
// while it renders join it.
func TestPageWaitAnswersTheRenderedPage(t *testing.T) {
	n := newMissAPI(t, "")
	first, second := n.getAsync(waitQuery+"&wait=10s"), n.getAsync(waitQuery+"&wait=5s")
	n.until(t, 2)
	n.render(t, "desktop|"+waitURL, "ok", 200, "<p>fresh</p>")
	for _, ch := range []chan pageAnswer{first, second} {
		a := <-ch
		if a.code != 200 || a.body != "<p>fresh</p>" || a.header.Get("Content-Security-Policy") != PageCSP ||
			a.header.Get("X-Freshq-Stale") != "false" || a.header.Get("Content-Type") != "text/html" {
			t.Fatalf("%d %v %q", a.code, a.header, a.body)
		}
	}
}

// A wait that passes is a 504 JSON error; a render that ends without a page is a 502.
func TestPageWaitTimeoutAndFailure(t *testing.T) {
	n := newMissAPI(t, "")
	ch := n.getAsync(waitQuery + "&wait=2s")
	n.until(t, 1)
	close(n.timeout)
	a := <-ch
	if e := errorOf(t, a); a.code != 504 || e.Error != "the page was not rendered within 2s" {
		t.Fatalf("timeout: %d %+v", a.code, e)
	}

	n = newMissAPI(t, "")
	ch = n.getAsync(waitQuery + "&wait=2s")
	n.until(t, 1)
	n.render(t, "desktop|"+waitURL, "timeout", 0, "")
	a = <-ch
	if e := errorOf(t, a); a.code != 502 || e.Error != "the render ended timeout without a servable page" {
		t.Fatalf("failure: %d %+v", a.code, e)
	}
}

// Past page.max_waiters, and once worker 0 stops, the answer is a 503 with Retry-After: 1, at
// once; the waiters of a stop are answered so too.
func TestPageWaitRefusalsAre503WithRetryAfter(t *testing.T) {
	n := newMissAPI(t, "page: {max_waiters: 1}\n")
	waiting := n.getAsync(waitQuery + "&wait=10s")
	n.until(t, 1)
	a := n.get(waitQuery + "&wait=10s")
	if e := errorOf(t, a); a.code != 503 || a.header.Get("Retry-After") != "1" || e.Error != "1 requests are waiting for renders already (page.max_waiters)" {
		t.Fatalf("past max_waiters: %d %v %+v", a.code, a.header, e)
	}
	n.misses.Stop()
	for _, a := range []pageAnswer{<-waiting, n.get(waitQuery + "&wait=10s")} {
		if e := errorOf(t, a); a.code != 503 || a.header.Get("Retry-After") != "1" || e.Error != "worker 0 is stopping; retry shortly" {
			t.Fatalf("stopping: %d %v %+v", a.code, a.header, e)
		}
	}
}

// A server built without render on miss refuses a wait with a 400 naming it.
func TestPageWaitWithoutMissesIsRefused(t *testing.T) {
	n := newOpNode(t)
	resp, err := http.Post(n.srv.URL+"/v1/pages?url="+url.QueryEscape(waitURL)+"&wait=1s", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e wire.ErrorBody
	json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != 400 || e.Field != "wait" {
		t.Fatalf("%d %+v", resp.StatusCode, e)
	}
}

// A client that leaves while it waits is taken off the flight; the handler writes nothing.
func TestPageWaitClientThatLeavesIsDropped(t *testing.T) {
	n := newMissAPI(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.srv.URL+"/v1/pages?"+waitQuery+"&wait=10s", nil)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	n.until(t, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client got %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, w := n.misses.Waiting(); w == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter was not dropped")
		}
		runtime.Gosched()
	}
}

// A GET never writes on the admin listener, nor a HEAD: with ?wait= either is refused naming
// wait (a HEAD's answer has no body to name it in), and nothing is filed; render on miss is a
// POST, and only for a host render.domains names.
func TestPageWaitGETNeverWrites(t *testing.T) {
	n := newMissAPI(t, "")
	a := n.send(http.MethodGet, waitQuery+"&wait=10s")
	if e := errorOf(t, a); a.code != 400 || e.Field != "wait" || !strings.Contains(e.Error, "POST /v1/pages") {
		t.Fatalf("GET with wait: %d %+v", a.code, e)
	}
	if a := n.send(http.MethodHead, waitQuery+"&wait=1s"); a.code != 400 {
		t.Fatalf("HEAD with wait: %d, want 400", a.code)
	}
	other := "url=" + url.QueryEscape("https://evil.test/p/1") + "&wait=10s"
	a = n.send(http.MethodPost, other)
	if e := errorOf(t, a); a.code != 404 || e.Field != "url" || !strings.Contains(e.Error, "render.domains") {
		t.Fatalf("another host: %d %+v", a.code, e)
	}
	if rows := n.AllRows(); len(rows) != 0 {
		t.Fatalf("refused requests filed %d rows", len(rows))
	}
}

// New targets from renders on miss are rate-limited per host (serve.miss_rate, miss_burst):
// past the burst a 503 with Retry-After, nothing filed.
func TestPageWaitNewTargetsAreRateLimited(t *testing.T) {
	n := newMissAPI(t, "serve: {miss_rate: 0.5, miss_burst: 1}\n")
	ch := n.getAsync(waitQuery + "&wait=10s")
	n.until(t, 1)
	a := n.get("url=" + url.QueryEscape("https://shop.test/p/second") + "&wait=10s")
	if e := errorOf(t, a); a.code != 503 || a.header.Get("Retry-After") != "2" || !strings.Contains(e.Error, "serve.miss_rate") {
		t.Fatalf("past the burst: %d %v %+v", a.code, a.header, e)
	}
	if rows := n.AllRows(); len(rows) != 1 {
		t.Fatalf("%d rows, want the first only", len(rows))
	}
	close(n.timeout)
	<-ch
}
