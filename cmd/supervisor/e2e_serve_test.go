package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// siteOrigin is a small site for a crawler to ask freshq about: every page counts its hits,
// /gone declares a 404 and /moved a 301 the way prerender's meta tags do.
type siteOrigin struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newSiteOrigin(t testing.TB) *siteOrigin {
	o := &siteOrigin{hits: map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.hits[r.URL.Path]++
		o.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/gone":
			fmt.Fprint(w, `<!doctype html><meta name="prerender-status-code" content="404"><p>gone</p>`)
		case "/moved":
			fmt.Fprint(w, `<!doctype html><meta name="prerender-status-code" content="301">`+
				`<meta name="prerender-header" content="Location: https://elsewhere.example/new"><p>moved</p>`)
		default:
			fmt.Fprintf(w, "<!doctype html><title>%s</title><p>rendered %s?%s</p>", r.URL.Path, r.URL.Path, r.URL.RawQuery)
		}
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *siteOrigin) hitsOf(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits[path]
}

// serveYAML is a node with the crawler listener on serveAddr, rendering the local origin.
func serveYAML(serveAddr, extra string) string {
	return fmt.Sprintf(`queue: {ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: http
  timeout: 20s
  domains: ["127.0.0.1"]
serve:
  listen: %s
  tokens: [crawl-token]
  wait: 20s
%s`, serveAddr, extra)
}

type crawlAnswer struct {
	code   int
	header http.Header
	body   string
}

// crawl sends what a prerender middleware sends: GET {serve}/{url} with the token and a
// crawler's User-Agent; headers are extra name, value pairs.
func crawl(t testing.TB, serveAddr, rawTarget string, headers ...string) crawlAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+serveAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = rawTarget
	req.Header.Set("X-Prerender-Token", "crawl-token")
	req.Header.Set("User-Agent", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DisableCompression: true}}
	resp, err := client.Do(req)
	if err != nil {
		return crawlAnswer{code: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return crawlAnswer{resp.StatusCode, resp.Header, string(b)}
}

// stored reports whether the node holds a target for u (desktop), through the admin API.
func (n *node) stored(t testing.TB, u string) bool {
	t.Helper()
	resp, err := http.Get("http://" + n.addr + "/v1/targets?url=" + url.QueryEscape(u))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /v1/targets?url=%s: %d %s", u, resp.StatusCode, b)
	}
	return resp.StatusCode == http.StatusOK
}

// The crawler listener against the built binaries: a crawler's first request for an unrendered
// page comes back rendered, the second from the cache without touching the origin; declared
// 404 and 301 reach the crawler as such; every refusal is a clear error and files nothing; the
// admin listener's GET never writes; POST /recache rushes; the series are in /metrics.
func TestEndToEndCrawlerListener(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSiteOrigin(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, "  miss_burst: 4\n  miss_rate: 0.001\n"), "")
	waitFor(t, "ready", 30*time.Second, n.ready)

	page := origin.URL + "/p/1?b=2&a=1"
	first := crawl(t, serveAddr, "/"+page)
	if first.code != 200 || !strings.Contains(first.body, "rendered /p/1?a=1&b=2") || first.header.Get("X-Freshq-Cache") != "miss" ||
		first.header.Get("Content-Security-Policy") != "" {
		t.Fatalf("first request: %d %v %q", first.code, first.header, first.body)
	}
	second := crawl(t, serveAddr, "/"+url.PathEscape(origin.URL+"/p/1?a=1&b=2"), "Accept-Encoding", "gzip")
	if second.code != 200 || second.header.Get("X-Freshq-Cache") != "hit" || second.header.Get("ETag") == "" {
		t.Fatalf("second request: %d %v %q", second.code, second.header, second.body)
	}
	if h := origin.hitsOf("/p/1"); h != 1 {
		t.Fatalf("the origin was hit %d times for two crawler requests", h)
	}
	if !n.stored(t, page) {
		t.Fatal("the page rendered on miss is not filed under its URL")
	}
	if a := crawl(t, serveAddr, "/render/"+page, "If-None-Match", second.header.Get("ETag")); a.code != 304 {
		t.Fatalf("If-None-Match: %d", a.code)
	}
	if a := crawl(t, serveAddr, "/"+origin.URL+"/gone"); a.code != 404 {
		t.Fatalf("declared 404: %d %v %q", a.code, a.header, a.body)
	}
	if a := crawl(t, serveAddr, "/"+origin.URL+"/moved"); a.code != 301 || a.header.Get("Location") != "https://elsewhere.example/new" {
		t.Fatalf("declared 301: %d %v %q", a.code, a.header, a.body)
	}

	// Refusals: each a JSON error naming its field, each filing nothing.
	for _, tc := range []struct {
		name, target string
		headers      []string
		code         int
		field        string
	}{
		{"no token", "/" + origin.URL + "/p/notoken", []string{"X-Prerender-Token", ""}, 401, "X-Prerender-Token"},
		{"wrong token", "/" + origin.URL + "/p/wrong", []string{"X-Prerender-Token", "guess"}, 403, "X-Prerender-Token"},
		{"another host", "/http://evil.test/p/1", nil, 503, "url"}, // never a 404: the page may well exist
		{"not a URL", "/p/1", nil, 400, "url"},
		{"the admin API", "/v1/targets", nil, 400, "url"},
	} {
		a := crawl(t, serveAddr, tc.target, tc.headers...)
		var e struct{ Error, Field string }
		if json.Unmarshal([]byte(a.body), &e); a.code != tc.code || e.Field != tc.field || e.Error == "" {
			t.Errorf("%s: %d %q, want %d naming %s", tc.name, a.code, a.body, tc.code, tc.field)
		}
	}
	for _, u := range []string{origin.URL + "/p/notoken", origin.URL + "/p/wrong", "http://evil.test/p/1"} {
		if n.stored(t, u) {
			t.Errorf("a refused request filed %s", u)
		}
	}
	// The burst of new targets of the origin's host is 4: /p/1, /gone, /moved, then one more.
	if a := crawl(t, serveAddr, "/"+origin.URL+"/p/2"); a.code != 200 {
		t.Fatalf("fourth new page: %d %q", a.code, a.body)
	}
	limited := crawl(t, serveAddr, "/"+origin.URL+"/p/3")
	if limited.code != 503 || limited.header.Get("Retry-After") == "" || !strings.Contains(limited.body, "serve.miss_rate") {
		t.Fatalf("past serve.miss_burst: %d %v %q", limited.code, limited.header, limited.body)
	}
	if n.stored(t, origin.URL+"/p/3") || origin.hitsOf("/p/3") != 0 {
		t.Fatal("a rate-limited miss filed or rendered its page")
	}

	// The admin listener: a GET never writes; POST /recache rushes.
	resp, err := http.Get("http://" + n.addr + "/v1/pages?url=" + url.QueryEscape(origin.URL+"/p/admin") + "&wait=5s")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || n.stored(t, origin.URL+"/p/admin") {
		t.Fatalf("admin GET with wait: %d, or it filed its page", resp.StatusCode)
	}
	resp, err = http.Post("http://"+n.addr+"/recache", "application/json", strings.NewReader(`{"prerenderToken":"x","url":"`+page+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// No device named: the page for every device, desktop rendered again and mobile filed.
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"rushed":2`) {
		t.Fatalf("recache: %d %s", resp.StatusCode, b)
	}
	waitFor(t, "the recached page rendered again, for both devices", 30*time.Second, func() bool { return origin.hitsOf("/p/1") == 3 })

	m := n.metrics()
	if m[`freshq_serve_requests_total{code="200",family="google",result="hit",verification="unchecked"}`] < 1 || m[`freshq_serve_requests_total{code="200",family="google",result="miss",verification="unchecked"}`] < 2 ||
		m[`freshq_serve_requests_total{code="401",family="google",result="error",verification="unchecked"}`] != 1 || m[`freshq_serve_seconds_count{result="hit"}`] < 1 {
		t.Fatalf("serve series: %v", pick(m, "freshq_serve_"))
	}
}

func pick(m map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}
