package serve

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

const start = int64(1_800_000_000_000)

const baseYAML = `token: admin-token
render:
  domains: [shop.test]
serve:
  listen: 127.0.0.1:3999
  tokens: [crawl-token]
  miss_rate: 1
  miss_burst: 2
routes:
  - {name: product, match: prefix, path: /p/, interval: 1h, swr: 1h}
  - {name: strict, match: prefix, path: /s/, interval: 1h, swr: 1h, serve_stale: false}
`

// node is a crawler listener over a test store, with worker 0's Applier to land renders. A
// wait for a render on miss ends only when the test closes timeout.
type node struct {
	*qtest.Env
	h       *Handler
	srv     *httptest.Server
	misses  *misses.Flights
	applier *apply.Applier
	timeout chan time.Time
	rushed  chan string
	reg     *prometheus.Registry
	admin   atomic.Pointer[string] // the admin token in force, as a reload changes it
}

func newNode(t testing.TB, yaml string, with ...func(*HandlerDeps)) *node {
	e := qtest.New(t, yaml, start, shm.Options{})
	n := &node{Env: e, timeout: make(chan time.Time), rushed: make(chan string, 16), reg: prometheus.NewRegistry()}
	admin := "admin-token"
	n.admin.Store(&admin)
	locks := &intake.KeyLocks{}
	targets := intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	n.misses = &misses.Flights{Targets: targets, Settings: qtest.Settings(e, MissesSettingsOf), After: func(time.Duration) <-chan time.Time { return n.timeout }}
	n.applier = intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Seg: e.Seg, Locks: locks, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now, Misses: n.misses})
	h, err := newHandlerWith(HandlerDeps{Targets: targets, Misses: n.misses, Settings: qtest.Settings(e, ServeSettingsOf), Now: e.Now, AdminToken: func() string { return *n.admin.Load() },
		Metrics: NewMetrics(n.reg), Demand: &Demand{HalfLifeMs: qtest.Hour, MaxBytes: 1 << 20},
		Rushed: func(key []byte, _ bool, _ error) { n.rushed <- string(key) }}, with...)
	if err != nil {
		t.Fatal(err)
	}
	n.h = h
	n.h.Start(t.Context())
	n.srv = httptest.NewServer(n.h)
	t.Cleanup(n.srv.Close)
	t.Cleanup(n.h.Stop)
	t.Cleanup(n.misses.Stop) // runs first: a failed test leaves no request waiting on Close
	return n
}

// newHandlerWith is NewHandler over d as the with functions change it.
func newHandlerWith(d HandlerDeps, with ...func(*HandlerDeps)) (*Handler, error) {
	for _, f := range with {
		f(&d)
	}
	return NewHandler(d)
}

type reply struct {
	code   int
	header http.Header
	body   string
}

// get sends GET {target} as the request-target, exactly as given, with the crawl token and the
// headers given as name, value pairs ("X-Prerender-Token", "" sends none).
func (n *node) get(target string, headers ...string) reply {
	return n.do(http.MethodGet, target, headers...)
}

func (n *node) do(method, target string, headers ...string) reply {
	req, _ := http.NewRequest(method, n.srv.URL, nil)
	req.URL.Opaque = target
	req.Header.Set(HeaderToken, "crawl-token")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	tr := &http.Transport{DisableCompression: true}
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		return reply{code: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func (n *node) async(target string, headers ...string) chan reply {
	ch := make(chan reply, 1)
	go func() { ch <- n.get(target, headers...) }()
	return ch
}

// render lands a render of key as a render worker's result would.
func (n *node) render(t *testing.T, key, outcome string, status int, body string, headers map[string]string) {
	t.Helper()
	l := intake.WireLease(n.Grant([]byte(key)))
	if headers == nil {
		headers = map[string]string{"content-type": "text/html"}
	}
	st, err := n.applier.Apply([]wire.Result{{Key: []byte(key), Outcome: outcome, Status: status, Body: []byte(body), Lease: l, Headers: headers}})
	if err != nil || st.Applied != 1 {
		t.Fatalf("apply: %+v %v", st, err)
	}
}

// file files key as a submitted target, so that render can land a page for it.
func (n *node) file(t *testing.T, url string) {
	t.Helper()
	if _, _, err := n.h.d.Targets.Discover(url, ""); err != nil {
		t.Fatal(err)
	}
}

// until polls until waiters requests wait on a started flight (a signal, not a wait for time).
func (n *node) until(t *testing.T, waiters int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if f, w := n.misses.Waiting(); f >= 1 && w == waiters {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %d waiters", waiters)
		}
		time.Sleep(time.Millisecond)
	}
}

func errorOf(t *testing.T, a reply) wire.ErrorBody {
	t.Helper()
	var e wire.ErrorBody
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || e.Error == "" {
		t.Fatalf("%d %q: not a JSON error (%v)", a.code, a.body, err)
	}
	return e
}

// nothingWritten fails the test if any target is stored.
func (n *node) nothingWritten(t *testing.T, what string) {
	t.Helper()
	if rows := n.AllRows(); len(rows) != 0 {
		t.Fatalf("%s wrote %d rows (first %q)", what, len(rows), rows[0].Key)
	}
}

const page = "https://shop.test/p/1"

// A stored page is served as the site would serve it, whichever form the request takes: its
// status, its headers, Age, Last-Modified, an ETag with its 304, gzip when accepted, HEAD;
// and no CSP. Its caching headers are freshq's, not the origin's: private, and varying by
// User-Agent (a shared cache in front of the site must not hand the crawler's page to people);
// the gzip and plain bodies have ETags of their own, and either one's validator gets a 304.
func TestServesTheStoredPageInEveryForm(t *testing.T) {
	n := newNode(t, baseYAML)
	n.file(t, page+"?b=2&a=1")
	body := "<html>" + strings.Repeat("shoes ", 400) + "</html>"
	n.render(t, "desktop|"+page+"?a=1&b=2", "ok", 200, body, map[string]string{"content-type": "text/html; charset=utf-8", "cache-control": "max-age=60"})
	n.Advance(5_000)
	for _, target := range []string{
		"/" + page + "?b=2&a=1",
		"/" + page + "?a=1&b=2&utm_source=x",
		"/https%3A%2F%2Fshop.test%2Fp%2F1%3Fb%3D2%26a%3D1",
		"/https:/shop.test/p/1?a=1&b=2", // a proxy merged the slashes
		"/render/" + page + "?a=1&b=2",
		"/render?url=https%3A%2F%2Fshop.test%2Fp%2F1%3Fa%3D1%26b%3D2",
		"/HTTPS://SHOP.TEST/p/1?a=1&b=2",
	} {
		a := n.get(target)
		if a.code != 200 || a.body != body || a.header.Get(HeaderCache) != "hit" || a.header.Get(HeaderStale) != "false" ||
			a.header.Get("Age") != "5" || a.header.Get("Cache-Control") != "private" || a.header.Get("Vary") != "Accept-Encoding, User-Agent" ||
			a.header.Get("Content-Type") != "text/html; charset=utf-8" || a.header.Get("Content-Security-Policy") != "" ||
			a.header.Get("Last-Modified") != time.UnixMilli(start).UTC().Format(http.TimeFormat) {
			t.Fatalf("%s: %d %v %.60q", target, a.code, a.header, a.body)
		}
	}
	a := n.get("/"+page+"?a=1&b=2", "Accept-Encoding", "gzip, deflate")
	if a.header.Get("Content-Encoding") != "gzip" || len(a.body) >= len(body) {
		t.Fatalf("gzip: %v %d bytes", a.header, len(a.body))
	}
	zr, err := gzip.NewReader(strings.NewReader(a.body))
	if err != nil {
		t.Fatal(err)
	}
	if plain, _ := io.ReadAll(zr); string(plain) != body {
		t.Fatal("gzip body differs")
	}
	// The page is stored gzipped, and a client that accepts gzip gets the stored bytes: a hit
	// compresses nothing.
	stored, err := n.Store.GetPage([]byte("desktop|" + page + "?a=1&b=2"))
	if err != nil || !intake.Gzipped(&stored) || a.body != string(stored.Body) || a.header.Get("Content-Length") != strconv.Itoa(len(stored.Body)) {
		t.Fatalf("gzip: %d bytes (Content-Length %s), stored %d gzipped=%v: want the stored bytes as they are",
			len(a.body), a.header.Get("Content-Length"), len(stored.Body), intake.Gzipped(&stored))
	}
	etag := a.header.Get("ETag")
	plainETag := n.get("/" + page + "?a=1&b=2").header.Get("ETag")
	if etag == plainETag || etag != plainETag[:len(plainETag)-1]+`-gzip"` {
		t.Fatalf("the gzip body's ETag %s and the plain body's %s: want two validators, the gzip one marked", etag, plainETag)
	}
	if b := n.get("/"+page+"?a=1&b=2", "If-None-Match", etag, "Accept-Encoding", "gzip"); b.code != 304 || b.body != "" || b.header.Get("ETag") != etag {
		t.Fatalf("If-None-Match: %d %v", b.code, b.header)
	}
	if b := n.get("/"+page+"?a=1&b=2", "If-None-Match", etag); b.code != 304 || b.header.Get("ETag") != plainETag {
		t.Fatalf("the gzip validator from a plain client: %d %v, want 304 with the plain ETag", b.code, b.header)
	}
	if b := n.get("/"+page+"?a=1&b=2", "If-None-Match", `"other"`); b.code != 200 {
		t.Fatalf("another etag: %d", b.code)
	}
	if h := n.do(http.MethodHead, "/"+page+"?a=1&b=2"); h.code != 200 || h.body != "" || h.header.Get("Content-Length") != "2413" {
		t.Fatalf("HEAD: %d %v %q", h.code, h.header, h.body)
	}
	if got := testutil.ToFloat64(n.h.d.Metrics.requests.WithLabelValues("hit", "200", "none", "none")); got < 9 {
		t.Fatalf("freshq_serve_requests_total{hit,200} = %v", got)
	}
	if c := n.h.Demand().Count([]byte("desktop|"+page+"?a=1&b=2"), n.Now()); c < 11 {
		t.Fatalf("demand count %v", c)
	}
}

// A declared redirect is served with its Location; the device comes from the User-Agent, or
// X-Freshq-Device.
func TestRedirectAndDevice(t *testing.T) {
	n := newNode(t, baseYAML)
	n.file(t, page)
	n.render(t, "desktop|"+page, "ok", 301, "<p>moved</p>", map[string]string{"content-type": "text/html", "location": "https://shop.test/p/2"})
	a := n.get("/" + page)
	if a.code != 301 || a.header.Get("Location") != "https://shop.test/p/2" {
		t.Fatalf("%d %v", a.code, a.header)
	}
	if _, _, err := n.h.d.Targets.Discover(page, "mobile"); err != nil {
		t.Fatal(err)
	}
	n.render(t, "mobile|"+page, "ok", 200, "<p>small</p>", nil)
	googlebotPhone := "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	if a := n.get("/"+page, "User-Agent", googlebotPhone); a.code != 200 || a.body != "<p>small</p>" {
		t.Fatalf("mobile UA: %d %q", a.code, a.body)
	}
	if a := n.get("/"+page, "User-Agent", googlebotPhone, HeaderDevice, "desktop"); a.code != 301 {
		t.Fatalf("X-Freshq-Device desktop: %d", a.code)
	}
	if a := n.get("/"+page, HeaderDevice, "tv"); a.code != 400 || errorOf(t, a).Field != HeaderDevice {
		t.Fatalf("unknown device: %d %q", a.code, a.body)
	}
}

// Every refusal is a JSON error naming what was wrong, and writes nothing.
func TestRefusalsNameTheirFieldAndWriteNothing(t *testing.T) {
	n := newNode(t, baseYAML)
	for _, tc := range []struct {
		name    string
		method  string
		target  string
		headers []string
		code    int
		field   string
	}{
		{"no token", "GET", "/" + page, []string{HeaderToken, ""}, 401, HeaderToken},
		{"wrong token", "GET", "/" + page, []string{HeaderToken, "guess"}, 403, HeaderToken},
		{"admin token", "GET", "/" + page, []string{HeaderToken, "admin-token"}, 403, HeaderToken},
		// A host freshq does not render is 503 (come back), never 404 (the page does not exist),
		// which the middleware would relay to the crawler as it is.
		{"another host", "GET", "/https://evil.test/p/1", nil, 503, "url"},
		{"a subdomain trick", "GET", "/https://shop.test.evil.test/p/1", nil, 503, "url"},
		{"not a URL", "GET", "/p/1", nil, 400, "url"},
		{"no host", "GET", "/https:///p/1", nil, 400, "url"},
		{"another scheme", "GET", "/ftp://shop.test/p/1", nil, 400, "url"},
		{"bad escape", "GET", "/https%3A%2F%2Fshop.test%2F%25zz", nil, 400, "url"},
		{"two url params", "GET", "/render?url=https://shop.test/a&url=https://shop.test/b", nil, 400, "url"},
		{"userinfo", "GET", "/https://me:pw@shop.test/p/1", nil, 400, "url"},
		{"a write", "POST", "/" + page, nil, 405, ""},
		{"the API", "GET", "/v1/targets", nil, 400, "url"},
	} {
		a := n.do(tc.method, tc.target, tc.headers...)
		if e := errorOf(t, a); a.code != tc.code || e.Field != tc.field {
			t.Errorf("%s: %d %+v, want %d naming %q", tc.name, a.code, e, tc.code, tc.field)
		}
		n.nothingWritten(t, tc.name)
	}
	if got := testutil.ToFloat64(n.h.d.Metrics.requests.WithLabelValues("error", "401", "none", "none")); got != 1 {
		t.Fatalf("freshq_serve_requests_total{error,401} = %v", got)
	}
}

// Without render.domains nothing is rendered on miss; with no tokens only loopback is served.
func TestNoDomainsRendersNothingOnMiss(t *testing.T) {
	n := newNode(t, "serve: {listen: '127.0.0.1:3999'}\n")
	a := n.get("/https://any.test/p/1", HeaderToken, "")
	if e := errorOf(t, a); a.code != 503 || a.header.Get("Retry-After") != unnamedHostRetryAfter || e.Field != "url" || !strings.Contains(e.Error, "render.domains") {
		t.Fatalf("%d %v %+v, want 503 with a long Retry-After", a.code, a.header, e)
	}
	n.nothingWritten(t, "a miss without render.domains")
}

// New targets from misses are rate-limited per host: past the burst, 503 with Retry-After, and
// the refused URL is not filed; a known target and another host are not held back.
func TestMissRateLimitPerHost(t *testing.T) {
	n := newNode(t, strings.Replace(baseYAML, "[shop.test]", "[shop.test, other.test]", 1))
	var waiting []chan reply
	for i, u := range []string{"https://shop.test/p/a", "https://shop.test/p/b"} {
		waiting = append(waiting, n.async("/"+u))
		n.until(t, i+1)
	}
	a := n.get("/https://shop.test/p/c")
	if e := errorOf(t, a); a.code != 503 || a.header.Get("Retry-After") != "1" || e.Field != "url" || !strings.Contains(e.Error, "serve.miss_rate") {
		t.Fatalf("past the burst: %d %v %+v", a.code, a.header, e)
	}
	if _, err := n.Store.GetSchedule([]byte("desktop|https://shop.test/p/c")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused miss was filed: %v", err)
	}
	// Nothing stored, nothing counted: the request counts hold only keys the store holds.
	if c, b := n.h.Demand().Count([]byte("desktop|https://shop.test/p/c"), n.Now()), n.h.Demand().Bytes(); c != 0 || b != 0 {
		t.Fatalf("a refused miss was counted: %v (%d bytes counted)", c, b)
	}
	waiting = append(waiting, n.async("/https://other.test/p/a"))
	n.until(t, 3)
	n.Advance(1000) // a token back
	waiting = append(waiting, n.async("/https://shop.test/p/c"))
	n.until(t, 4)
	close(n.timeout)
	for _, ch := range waiting {
		if a := <-ch; a.code != 503 || a.header.Get("Retry-After") == "" {
			t.Fatalf("timed-out wait: %d %q", a.code, a.body)
		}
	}
	if rows := n.AllRows(); len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	if b := n.h.Demand().Bytes(); b != 0 {
		t.Fatalf("misses that stored no page were counted: %d bytes", b)
	}
}

// A miss is rendered once for every waiter and served marked miss; a page that renders as a
// declared 404 reaches the crawler as 404, then from what is known, without rendering again.
func TestMissRendersOnceForEveryWaiter(t *testing.T) {
	n := newNode(t, baseYAML)
	first, second := n.async("/"+page), n.async("/"+page+"#frag")
	n.until(t, 2)
	n.render(t, "desktop|"+page, "ok", 200, "<p>fresh</p>", nil)
	for _, ch := range []chan reply{first, second} {
		if a := <-ch; a.code != 200 || a.body != "<p>fresh</p>" || a.header.Get(HeaderCache) != "miss" {
			t.Fatalf("%d %v %q", a.code, a.header, a.body)
		}
	}
	if a := n.get("/" + page); a.code != 200 || a.header.Get(HeaderCache) != "hit" {
		t.Fatalf("second request: %d %v", a.code, a.header)
	}

	gone := "https://shop.test/p/gone"
	ch := n.async("/" + gone)
	n.until(t, 1)
	n.render(t, "desktop|"+gone, "not_found", 404, "", nil)
	if a := <-ch; a.code != 404 {
		t.Fatalf("declared 404: %d %q", a.code, a.body)
	}
	if a := n.get("/" + gone); a.code != 404 || a.header.Get(HeaderCache) != "hit" {
		t.Fatalf("known 404: %d %v", a.code, a.header)
	}
	if _, w := n.misses.Waiting(); w != 0 {
		t.Fatalf("%d waiting after a known 404", w)
	}
}

// A page past its cadence plus swr is served, marked stale, and its row moved up (once);
// a route with serve_stale: false renders it on miss instead.
func TestStalePageIsServedAndMovedUp(t *testing.T) {
	n := newNode(t, baseYAML)
	n.file(t, page)
	n.render(t, "desktop|"+page, "ok", 200, "<p>old</p>", nil)
	n.Advance(90 * 60_000) // past the cadence, within swr
	if a := n.get("/" + page); a.code != 200 || a.header.Get(HeaderCache) != "stale" || a.header.Get(HeaderStale) != "true" {
		t.Fatalf("within swr: %d %v", a.code, a.header)
	}
	n.Advance(60 * 60_000) // past cadence + swr
	if a := n.get("/" + page); a.code != 200 || a.body != "<p>old</p>" || a.header.Get(HeaderCache) != "stale" {
		t.Fatalf("expired: %d %v %q", a.code, a.header, a.body)
	}
	if k := <-n.rushed; k != "desktop|"+page {
		t.Fatalf("rushed %q", k)
	}
	row, err := n.Store.GetSchedule([]byte("desktop|" + page))
	if err != nil || !row.Lanes.Urgent || row.DueAtMs > n.Now() {
		t.Fatalf("row not moved up: %+v %v", row, err)
	}
	n.get("/" + page) // urgent already: not queued again
	select {
	case k := <-n.rushed:
		t.Fatalf("rushed %q again", k)
	default:
	}

	strict := "https://shop.test/s/1"
	n.file(t, strict)
	n.render(t, "desktop|"+strict, "ok", 200, "<p>old</p>", nil)
	n.Advance(3 * qtest.Hour)
	ch := n.async("/" + strict)
	n.until(t, 1)
	n.render(t, "desktop|"+strict, "ok", 200, "<p>new</p>", nil)
	if a := <-ch; a.code != 200 || a.body != "<p>new</p>" || a.header.Get(HeaderCache) != "miss" {
		t.Fatalf("serve_stale false: %d %v %q", a.code, a.header, a.body)
	}
}

// NewHandler refuses deps without any required dependency, naming it: a listener without
// metrics or demand counting would look idle and starve the freshness policy's counters.
func TestNewHandlerRefusesAMissingDependency(t *testing.T) {
	n := newNode(t, "")
	full := n.h.d
	if _, err := NewHandler(full); err != nil {
		t.Fatalf("every dependency given: %v", err)
	}
	for name, drop := range map[string]func(*HandlerDeps){
		"Targets": func(d *HandlerDeps) { d.Targets = nil }, "Misses": func(d *HandlerDeps) { d.Misses = nil },
		"Settings": func(d *HandlerDeps) { d.Settings = nil }, "Now": func(d *HandlerDeps) { d.Now = nil },
		"Metrics": func(d *HandlerDeps) { d.Metrics = nil }, "Demand": func(d *HandlerDeps) { d.Demand = nil },
	} {
		d := full
		drop(&d)
		got, err := NewHandler(d)
		if !errors.Is(err, ErrMissingDependency) || !strings.Contains(err.Error(), name) || got != nil {
			t.Errorf("without %s: %v, %v; want ErrMissingDependency naming it", name, got, err)
		}
	}
}

// The admin token refused here is the one in force: after a reload that changes it, the new one
// is refused as the admin token (never served a page), and the old one is a wrong token.
func TestAdminTokenRefusedAsReloaded(t *testing.T) {
	n := newNode(t, baseYAML)
	if e := errorOf(t, n.get("/"+page, HeaderToken, "admin-token")); !strings.Contains(e.Error, "admin token") {
		t.Fatalf("the admin token: %+v", e)
	}
	next := "admin-token-2"
	n.admin.Store(&next)
	a := n.get("/"+page, HeaderToken, "admin-token-2")
	if e := errorOf(t, a); a.code != 403 || !strings.Contains(e.Error, "admin token") {
		t.Fatalf("the reloaded admin token: %d %+v, want 403 refusing the admin token", a.code, e)
	}
	if e := errorOf(t, n.get("/"+page, HeaderToken, "admin-token")); strings.Contains(e.Error, "admin token") {
		t.Fatalf("the old admin token is still refused as the admin token: %+v", e)
	}
}
