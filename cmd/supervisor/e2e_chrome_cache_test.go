package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// An operator's recache renders with a cold browser cache, on the real supervisor and workers:
// the site deploys a new app.js under the same URL with max-age of a day, so the long-lived
// browser of the render worker still holds the old one, and the page it draws looks fine (no
// signal of anything wrong, so no second look). The recache raises worker 0's cache epoch; the
// render worker passes it on, its browser clears its cache, and the rushed render fetches the
// new script: the stored page shows the new app. Without the epoch the page keeps the old app.
func TestEndToEndRecacheRendersWithAColdCache(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	var version, scriptHits atomic.Int64
	version.Store(1)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/app.js":
			scriptHits.Add(1)
			w.Header().Set("Content-Type", "text/javascript")
			w.Header().Set("Cache-Control", "public, max-age=86400")
			fmt.Fprintf(w, `document.getElementById("app").textContent = "app v%d"`, version.Load())
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-cache")
			fmt.Fprint(w, `<!doctype html><html><body><div id=app>Loading…</div><script src="/app.js"></script></body></html>`)
		}
	}))
	t.Cleanup(origin.Close)
	n := startNode(t, t.TempDir(), 2, `queue: {ready: {sweep_interval: 1s}}
render:
  renderer: chrome
  concurrency: 1
  timeout: 20s
  domains: ["127.0.0.1"]
  chrome: {idle: 200ms, cache_max_age: 0s}
`, "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	page := origin.URL + "/p/1"
	var up map[string]any
	if code := n.post("/v1/targets", []map[string]string{{"url": page, "device": "desktop"}}, &up); code != http.StatusOK {
		t.Fatalf("POST /v1/targets: %d %v", code, up)
	}
	stored := func() string {
		resp, err := http.Get("http://" + n.addr + "/v1/pages?url=" + url.QueryEscape(page))
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitFor(t, "the page with app v1", 60*time.Second, func() bool { return strings.Contains(stored(), "app v1") })
	if got := scriptHits.Load(); got != 1 {
		t.Fatalf("app.js fetched %d times before the deploy, want 1", got)
	}

	version.Store(2) // the deploy: a new app.js under the same URL
	var rushed map[string]any
	if code := n.post("/recache", map[string]string{"url": page}, &rushed); code != http.StatusOK {
		t.Fatalf("POST /recache: %d %v", code, rushed)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stored(), "app v2") {
		if time.Now().After(deadline) {
			t.Fatalf("after the recache the stored page is %q; app.js fetched %d times in all", stored(), scriptHits.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := scriptHits.Load(); got != 2 {
		t.Errorf("app.js fetched %d times in all, want 2 (before the deploy, and after the recache)", got)
	}
}
