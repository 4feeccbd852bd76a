package chrome

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// A page whose scripts come from the browser's cache becomes idle like any other: rendered
// again and again by one long-lived browser with 4 tabs, every render captures the fetched
// content and none times out. (A cache hit's "finished" event comes right behind its "will be
// sent"; handled out of order, the request looked in flight forever and the render timed out.)
func TestCachedScriptsDoNotHoldIdleness(t *testing.T) {
	s := newSite(t)
	s.cacheableSPA("/spa", 300*time.Millisecond)
	// A request left in flight holds its page until render.timeout, however long: the timeout
	// is generous, so that only that, not a machine busy with other tests, times a render out.
	r := newRenderer(t, func(c *Options) {
		c.Concurrency = 4
		c.Timeout = 30 * time.Second
		c.Idle = config.ChromeIdleDefault.D()
	})
	// The browser's first render fills its cache (and its tabs open): then every render takes
	// the scripts from the cache.
	renderMany(r, s.url("/spa/"), 4, 4)
	const n = 16
	results := renderMany(r, s.url("/spa/"), n, 4)
	timeouts := 0
	for i, res := range results {
		switch {
		case res.Outcome == outcome.Timeout:
			timeouts++
			t.Logf("render %d timed out at %s: %+v", i, res.Stage, res.Timings)
		case res.Outcome != outcome.OK || !strings.Contains(string(res.Body), `<div id="app">fetched content</div>`):
			t.Errorf("render %d: %v at %s (%s): %.200s", i, res.Outcome, res.Stage, res.Err, res.Body)
		}
	}
	if timeouts > 0 {
		t.Errorf("%d of %d renders timed out", timeouts, n)
	}
	if hits := s.count("/spa/lib0.js"); hits > 4 {
		t.Errorf("a cacheable script was fetched %d times by one browser; the test wants it from the cache", hits)
	}
}

// The document and its redirects come from the origin on every render, re-render and device,
// with the device's user agent, though both are cacheable (a permanent redirect, a document
// with only Last-Modified, which Chromium would keep by heuristic freshness); a cacheable
// script is fetched once by the browser and then taken from its cache.
func TestDocumentFromOriginEveryRender(t *testing.T) {
	s := newSite(t)
	var mu sync.Mutex
	var docUAs []string
	conditional := 0
	modified := time.Now().Add(-30 * 24 * time.Hour).UTC().Format(http.TimeFormat)
	s.mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/page", http.StatusMovedPermanently)
	})
	s.mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		docUAs = append(docUAs, r.UserAgent())
		if r.Header.Get("If-Modified-Since") != "" || r.Header.Get("If-None-Match") != "" {
			conditional++
		}
		n := len(docUAs)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Last-Modified", modified)
		fmt.Fprintf(w, `<!doctype html><html><body><p id=v>version %d</p><script src="/app.js"></script></body></html>`, n)
	})
	s.mux.HandleFunc("/app.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write([]byte(`document.body.insertAdjacentHTML("beforeend", "<p id=app>app</p>")`))
	})
	r := newRenderer(t, nil)
	renders := []struct{ device, ua string }{
		{"desktop", config.UserAgentDefault},
		{"desktop", config.UserAgentDefault}, // a re-render
		{"mobile", config.MobileUserAgentDefault},
		{"mobile", config.MobileUserAgentDefault},
		{"desktop", config.UserAgentDefault},
	}
	for i, c := range renders {
		res := render1(t, r, render.Request{URL: s.url("/old"), Device: c.device})
		want := fmt.Sprintf(`<p id="v">version %d</p>`, i+1)
		if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), want) || !strings.Contains(string(res.Body), `id="app"`) {
			t.Errorf("render %d (%s): %v %s; want %s: %.300s", i, c.device, res.Outcome, res.Err, want, res.Body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := s.count("/old"); got != len(renders) {
		t.Errorf("the redirect was fetched %d times in %d renders", got, len(renders))
	}
	if len(docUAs) != len(renders) {
		t.Fatalf("the document was fetched %d times in %d renders", len(docUAs), len(renders))
	}
	for i, c := range renders {
		if docUAs[i] != c.ua {
			t.Errorf("render %d (%s) fetched the document as %q, want %q", i, c.device, docUAs[i], c.ua)
		}
	}
	if conditional != 0 {
		t.Errorf("%d document requests were conditional; the origin must send the page", conditional)
	}
	if got := s.count("/app.js"); got != 1 {
		t.Errorf("the cacheable script was fetched %d times by one browser, want 1", got)
	}
}

// A connection held open for good does not keep a page from being ready: an EventSource never
// holds it (ready about render.chrome.idle after the last request), a same-site long-poll (an
// XHR or fetch to the page's site) no longer does once in flight for render.chrome.data_wait,
// and is reported pending. A page that defines prerenderReady is still captured only when it
// is true.
func TestLongLivedConnections(t *testing.T) {
	s := newSite(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	hold := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}
	s.mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("data: live\n\n"))
		w.(http.Flusher).Flush()
		hold(w, r)
	})
	s.mux.HandleFunc("/poll", hold)
	s.mux.HandleFunc("/data", func(w http.ResponseWriter, r *http.Request) {
		select { // the origin takes 300 ms to answer
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("fetched content"))
	})
	const show = `r => r.text()).then(t => document.body.insertAdjacentHTML("beforeend", "<p id=data>" + t + "</p>"))`
	s.page("/es", `<!doctype html><html><body><script>
const es = new EventSource("/events");
es.onmessage = e => document.body.insertAdjacentHTML("beforeend", "<p id=es>" + e.data + "</p>");
fetch("/data").then(`+show+`;</script></body></html>`)
	s.page("/longpoll", `<!doctype html><html><body><script>
fetch("/poll").then(() => document.body.insertAdjacentHTML("beforeend", "<p>never</p>"));
fetch("/data").then(`+show+`;</script></body></html>`)
	s.page("/flagged", `<!doctype html><html><body><script>window.prerenderReady = false;
new EventSource("/events"); fetch("/poll");
setTimeout(() => { document.body.insertAdjacentHTML("beforeend", "<p id=flagged>flagged</p>"); window.prerenderReady = true; }, 3000);</script></body></html>`)

	r := newRenderer(t, func(c *Options) {
		c.Timeout = 30 * time.Second
		c.Idle = config.ChromeIdleDefault.D()
		c.LongRequest = config.ChromeLongRequestDefault.D()
		c.DataWait = 3 * time.Second // the default, 10 s, would only make the test longer
	})
	idle, long, dataWait := config.ChromeIdleDefault.D(), config.ChromeLongRequestDefault.D(), 3*time.Second
	settle := config.ChromeSettleDefault.D()
	for _, c := range []struct {
		path, want  string
		longRequest time.Duration // render.chrome.long_request for this render
		min, max    time.Duration // of the wait after the load event
	}{
		// The EventSource holds nothing even when long_request would let it hold half the
		// render's time: the page is ready once its fetch has been answered (its content is
		// there) and render.chrome.settle passed: the page's own request said it was ready.
		// (The upper bounds leave seconds for a machine busy with other tests.)
		{"/es", `<p id="data">fetched content</p>`, 15 * time.Second, settle, 6 * time.Second},
		{"/longpoll", `<p id="data">fetched content</p>`, long, dataWait - 300*time.Millisecond, dataWait + idle + 3*time.Second},
	} {
		r.cfg.LongRequest = c.longRequest // no render is in flight
		res := render1(t, r, render.Request{URL: s.url(c.path)})
		if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), c.want) {
			t.Errorf("%s: %v at %s (%s): %.300s", c.path, res.Outcome, res.Stage, res.Err, res.Body)
			continue
		}
		if wait := res.Timings.Ready - res.Timings.Load; wait < c.min || wait > c.max {
			t.Errorf("%s: ready %s after the load event, want between %s and %s", c.path, wait, c.min, c.max)
		}
		if wantPending := map[string]int{"/es": 0, "/longpoll": 1}[c.path]; res.Signals == nil || res.Signals.PendingRequests != wantPending {
			t.Errorf("%s: signals %+v, want %d pending", c.path, res.Signals, wantPending)
		}
	}
	r.cfg.LongRequest = long
	res := render1(t, r, render.Request{URL: s.url("/flagged")})
	if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), `<p id="flagged">flagged</p>`) || res.Timings.Ready < 3*time.Second {
		t.Errorf("prerenderReady page: %v (%s), ready at %s: %.300s", res.Outcome, res.Err, res.Timings.Ready, res.Body)
	}
}
