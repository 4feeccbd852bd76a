package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// With the chrome renderer, end to end: a page whose content is its document (it asks its site
// for no data) and whose origin sends an ETag is checked with a conditional GET once rendered,
// not rendered again while it does not change: its re-renders are the origin's 304s, each a
// browser render not made. A single-page app whose document sends the same ETag, its content
// fetched from its site's API, is rendered in full every time: its shell's validator says
// nothing of its data. (queue.policy ready: each page is due one cadence, a minute, after it
// was observed, whatever its change estimate.)
func TestEndToEndRenderChromeChecksDocuments(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	const steps = 4
	var mu sync.Mutex
	full, checks := map[string]int{}, map[string]int{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/c/api" {
			fmt.Fprint(w, "Blue kettle, 20 EUR")
			return
		}
		if r.URL.Path != "/c/article" && r.URL.Path != "/c/app" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			checks[r.URL.Path]++
			w.WriteHeader(http.StatusNotModified)
			return
		}
		full[r.URL.Path]++
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/c/article" {
			fmt.Fprint(w, `<!doctype html><html><body><h1>Blue kettle</h1><p>20 EUR</p></body></html>`)
			return
		}
		fmt.Fprint(w, `<!doctype html><html><body><div id=app>Loading…</div><script>
fetch("/c/api").then(r => r.text()).then(t => { document.getElementById("app").textContent = t })</script></body></html>`)
	}))
	defer origin.Close()
	urls := []string{origin.URL + "/c/article", origin.URL + "/c/app"}
	n := startNode(t, t.TempDir(), 2, `queue: {policy: ready, ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: chrome
  concurrency: 2
  timeout: 30s
  domains: ["127.0.0.1"]
`, "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	upsertEveryMinute(t, n, urls)
	observedSince := func(since time.Time) func() bool { return allObservedSince(t, n, urls, since) }
	waitFor(t, "the first renders", 90*time.Second, observedSince(time.Time{}.Add(1)))
	for s := range steps {
		before := explain(t, n, urls[0]).Freshness.ObservedAt
		n.advanceClock(time.Minute)
		waitFor(t, fmt.Sprintf("step %d's observations", s), 90*time.Second, observedSince(before.Add(30*time.Second)))
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("article: %d full answers, %d 304s; app: %d full answers, %d 304s", full["/c/article"], checks["/c/article"], full["/c/app"], checks["/c/app"])
	if checks["/c/article"] < steps-1 || full["/c/article"] > 2 {
		t.Errorf("the article (its content in its document, an ETag): %d full answers and %d 304s over %d observations, want its re-renders checked with a conditional GET",
			full["/c/article"], checks["/c/article"], steps+1)
	}
	if checks["/c/app"] != 0 || full["/c/app"] < steps+1 {
		t.Errorf("the app (its content fetched from its API): %d full answers and %d 304s over %d observations, want every one rendered in full",
			full["/c/app"], checks["/c/app"], steps+1)
	}
	if got := n.metrics()[`freshq_render_conditional_total{result="not_modified"}`]; got < steps-1 {
		t.Errorf("freshq_render_conditional_total{result=\"not_modified\"} = %v, want at least %d", got, steps-1)
	}
}
