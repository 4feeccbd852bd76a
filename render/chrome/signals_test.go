package chrome

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/testkit/testdns"
)

// newRendererWithCDN is newRenderer with a third party besides the site: cdn.test, its own
// render.domains entry, on the same test origin (a path of its own tells its requests apart).
func newRendererWithCDN(t testing.TB, mutate func(*Options)) *Renderer {
	t.Helper()
	needChromium(t)
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	testdns.Use(t, map[string][]netip.Addr{"site.test": lo, "api.site.test": lo, "cdn.test": lo})
	cfg := testCfg()
	cfg.Domains = []string{"site.test", "cdn.test"}
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := New(cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func (s *site) on(host, path string) string {
	return "http://" + host + ":" + strings.TrimPrefix(s.URL, "http://127.0.0.1:") + path
}

func evidenceHas(sig *render.Signals, part string) bool {
	for _, e := range sig.Evidence {
		if strings.Contains(e, part) {
			return true
		}
	}
	return false
}

// A render that reached the page says what it saw besides the document: the exceptions its
// scripts threw, and its own data requests (XHR and fetch to its site: the document's host or
// one under the same render.domains entry) that failed with a network error or were answered
// 400–599, with a few lines of evidence. A third party's failure, a request freshq blocked, and
// a clean page count nothing; a page that never loaded has no signals.
func TestSignalsOfAPage(t *testing.T) {
	s := newSite(t)
	s.page("/clean", `<!doctype html><html><body><p>fine</p><script>fetch("/api/ok").then(r => r.text())</script></body></html>`)
	s.page("/throws", `<!doctype html><html><body><p>shell</p><script>throw new Error("boom in the app")</script></body></html>`)
	s.mux.HandleFunc("/api/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) })
	s.mux.HandleFunc("/api/missing", http.NotFound)
	s.mux.HandleFunc("/api/broken", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusBadGateway) })
	s.mux.HandleFunc("/api/reset", func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // no answer at all: a network error
		}
	})
	s.mux.HandleFunc("/third/api", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		http.Error(w, "down", http.StatusInternalServerError)
	})
	s.mux.HandleFunc("/blocked/api", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) })
	r := newRendererWithCDN(t, func(c *Options) {
		c.Block = []string{"*/blocked/*"}
		// Listed by name, so that the address policy lets it reach the test origin on loopback
		// (a subdomain match allows public addresses only); it is still on the page's site,
		// under the site.test entry.
		c.Domains = append(c.Domains, "api.site.test")
	})
	s.page("/failing", `<!doctype html><html><body><p>shell</p><script>
const x = new XMLHttpRequest(); x.open("GET", "/api/missing"); x.send();
fetch("/api/broken").catch(() => {});
fetch("/api/reset").catch(() => {});
fetch("`+s.on("api.site.test", "/api/missing?sub")+`", {mode: "no-cors"}).catch(() => {});
fetch("`+s.on("cdn.test", "/third/api")+`").catch(() => {});
fetch("/blocked/api").catch(() => {});
</script></body></html>`)

	res := render1(t, r, render.Request{URL: s.url("/clean")})
	if res.Outcome != outcome.OK || res.Signals == nil {
		t.Fatalf("clean page: %v %s, signals %+v", res.Outcome, res.Err, res.Signals)
	}
	if sig := *res.Signals; sig.Exceptions != 0 || sig.FailedRequests != 0 || sig.PendingRequests != 0 || sig.Cold || len(sig.Evidence) != 0 {
		t.Errorf("clean page's signals: %+v", sig)
	}

	res = render1(t, r, render.Request{URL: s.url("/throws")})
	if res.Signals == nil || res.Signals.Exceptions != 1 || !evidenceHas(res.Signals, "boom in the app") {
		t.Errorf("throwing page: %v, signals %+v", res.Outcome, res.Signals)
	}

	res = render1(t, r, render.Request{URL: s.url("/failing")})
	if res.Signals == nil {
		t.Fatalf("failing page: %v %s, no signals", res.Outcome, res.Err)
	}
	if sig := res.Signals; sig.FailedRequests != 4 || sig.Exceptions != 0 || sig.PendingRequests != 0 {
		t.Errorf("failing page's signals: %+v; want 4 failed (404, 502, reset, the subdomain's 404)", *sig)
	}
	for _, part := range []string{"/api/missing", "/api/broken", "/api/reset"} {
		if !evidenceHas(res.Signals, part) {
			t.Errorf("no evidence of %s: %q", part, res.Signals.Evidence)
		}
	}
	if evidenceHas(res.Signals, "/third/api") || evidenceHas(res.Signals, "/blocked/api") {
		t.Errorf("a third party's or a blocked request counted: %q", res.Signals.Evidence)
	}
	for _, e := range res.Signals.Evidence {
		if len(e) > render.MaxEvidenceLen {
			t.Errorf("evidence line of %d bytes", len(e))
		}
	}
	if len(res.Signals.Evidence) > render.MaxEvidence {
		t.Errorf("%d evidence lines", len(res.Signals.Evidence))
	}

	// Never loaded: no signals.
	res = render1(t, r, render.Request{URL: "http://elsewhere.test/"})
	if res.Signals != nil {
		t.Errorf("a render refused before it loaded has signals: %+v", res.Signals)
	}
}

// A page throwing in a loop costs its result at most render.MaxEvidence lines of at most
// render.MaxEvidenceLen bytes; the count is whole.
func TestSignalsEvidenceBounded(t *testing.T) {
	s := newSite(t)
	s.page("/loop", `<!doctype html><html><body><script>
for (let i = 0; i < 20; i++) setTimeout(() => { throw new Error("x".repeat(2000) + i) }, 0);</script></body></html>`)
	r := newRenderer(t, nil)
	res := render1(t, r, render.Request{URL: s.url("/loop")})
	if res.Signals == nil || res.Signals.Exceptions != 20 {
		t.Fatalf("%v %s: signals %+v", res.Outcome, res.Err, res.Signals)
	}
	if len(res.Signals.Evidence) != render.MaxEvidence {
		t.Errorf("%d evidence lines, want %d", len(res.Signals.Evidence), render.MaxEvidence)
	}
	for _, e := range res.Signals.Evidence {
		if len(e) > render.MaxEvidenceLen {
			t.Errorf("evidence line of %d bytes", len(e))
		}
	}
}

// A product page whose own API answers in 3 s (past render.chrome.long_request) and which sets
// no prerenderReady is captured with its product, not "Loading…": a same-site XHR or fetch holds
// the page for up to render.chrome.data_wait. A third party's request does not (it holds for
// long_request only), and a same-site request past data_wait (a long-poll) does not either: the
// page is captured, and the request is reported pending.
func TestSameSiteDataHoldsThePage(t *testing.T) {
	s := newSite(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	// The CDN's poll is another origin: the answer allows it.
	wait := func(d time.Duration) http.HandlerFunc {
		answer := delayed(d, hang, "Blue kettle, 20 EUR")
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Access-Control-Allow-Origin", "*")
			answer(w, r)
		}
	}
	s.mux.HandleFunc("/api/product/7", wait(3*time.Second))
	s.mux.HandleFunc("/poll", wait(time.Hour))
	s.mux.HandleFunc("/cdn/poll", wait(time.Hour))
	s.page("/product/7", `<!doctype html><html><body><div id=app>Loading…</div><script>
fetch("/api/product/7").then(r => r.text()).then(t => { document.getElementById("app").textContent = t })</script></body></html>`)
	r := newRendererWithCDN(t, func(c *Options) {
		c.Timeout = 30 * time.Second
		c.Idle = 500 * time.Millisecond
		c.LongRequest = 2 * time.Second
		c.DataWait = 10 * time.Second
	})
	s.page("/third", `<!doctype html><html><body><p id=app>ready</p><script>fetch("`+s.on("cdn.test", "/cdn/poll")+`").catch(() => {})</script></body></html>`)
	s.page("/longpoll", `<!doctype html><html><body><p id=app>ready</p><script>fetch("/poll").catch(() => {})</script></body></html>`)

	res := render1(t, r, render.Request{URL: s.url("/product/7")})
	if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), "Blue kettle, 20 EUR") || strings.Contains(string(res.Body), "Loading…") {
		t.Errorf("product page: %v %s: %.300s", res.Outcome, res.Err, res.Body)
	}
	if res.Signals == nil || res.Signals.PendingRequests != 0 {
		t.Errorf("product page's signals: %+v", res.Signals)
	}

	res = render1(t, r, render.Request{URL: s.url("/third")})
	if res.Outcome != outcome.OK || res.Timings.Ready-res.Timings.Load > 8*time.Second {
		t.Errorf("a third party's hanging request held the page: %v %s, timings %+v", res.Outcome, res.Err, res.Timings)
	}
	if res.Signals == nil || res.Signals.PendingRequests != 0 {
		t.Errorf("third party's request counted pending: %+v", res.Signals)
	}

	r.cfg.DataWait = 3 * time.Second // no render is in flight
	res = render1(t, r, render.Request{URL: s.url("/longpoll")})
	if res.Outcome != outcome.OK || res.Timings.Ready-res.Timings.Load < 3*time.Second-300*time.Millisecond {
		t.Errorf("same-site long-poll: %v %s, ready %s after load, want past data_wait", res.Outcome, res.Err, res.Timings.Ready-res.Timings.Load)
	}
	if res.Signals == nil || res.Signals.PendingRequests != 1 || !evidenceHas(res.Signals, "/poll") {
		t.Errorf("same-site long-poll's signals: %+v", res.Signals)
	}
}

// An exception thrown in a third party's frame (an ad, a widget on another site) is not the
// page's: it does not count. One the page's own scripts throw beside it does. (A cross-site frame
// runs in a renderer process of its own, a target whose events the render does not listen to.)
func TestSignalsExceptionsOfTheMainFrameOnly(t *testing.T) {
	s := newSite(t)
	s.mux.HandleFunc("/widget", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><html><body><script>throw new Error("the widget broke")</script></body></html>`))
	})
	r := newRendererWithCDN(t, nil)
	s.page("/framed", `<!doctype html><html><body><p>page</p><iframe src="`+s.on("cdn.test", "/widget")+`"></iframe></body></html>`)
	s.page("/both", `<!doctype html><html><body><p>page</p><iframe src="`+s.on("cdn.test", "/widget")+`"></iframe>
<script>setTimeout(() => { throw new Error("the page broke") }, 100)</script></body></html>`)
	res := render1(t, r, render.Request{URL: s.url("/framed")})
	if res.Outcome != outcome.OK || res.Signals == nil || res.Signals.Exceptions != 0 || s.count("/widget") != 1 {
		t.Errorf("a third party's frame threw: %v %s, widget fetched %d times, signals %+v", res.Outcome, res.Err, s.count("/widget"), res.Signals)
	}
	res = render1(t, r, render.Request{URL: s.url("/both")})
	if res.Signals == nil || res.Signals.Exceptions != 1 || !evidenceHas(res.Signals, "the page broke") || evidenceHas(res.Signals, "widget") {
		t.Errorf("the page and a frame threw: signals %+v", res.Signals)
	}
}
