package chrome

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// deployableApp is a single-page app on s: every /item/ and /ready/ path is the same shell,
// fetched with no-cache, whose /app.js (Cache-Control max-age one day, one URL for every
// version) draws the route or, for a route it does not know, its NotFound with a declared 404.
// deploy swaps the script for a version that knows /ready/ routes.
type deployableApp struct {
	mu      sync.Mutex
	version int
}

const appV1 = `const app = document.getElementById("app"); const p = location.pathname;
if (p.startsWith("/item/")) { app.textContent = "Item " + p.slice(6) } else {
  const m = document.createElement("meta"); m.name = "prerender-status-code"; m.content = "404"; document.head.appendChild(m);
  app.textContent = "NotFound (app v1)" }`

const appV2 = `const app = document.getElementById("app"); const p = location.pathname;
if (p.startsWith("/item/")) { app.textContent = "Item " + p.slice(6) } else if (p.startsWith("/ready/")) { app.textContent = "Ready " + p.slice(7) + " (app v2)" } else {
  const m = document.createElement("meta"); m.name = "prerender-status-code"; m.content = "404"; document.head.appendChild(m);
  app.textContent = "NotFound (app v2)" }`

func newDeployableApp(s *site) *deployableApp {
	a := &deployableApp{version: 1}
	shell := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write([]byte(`<!doctype html><html><head></head><body><div id=app>Loading…</div><script src="/app.js"></script></body></html>`))
	}
	s.mux.HandleFunc("/item/", shell)
	s.mux.HandleFunc("/ready/", shell)
	s.mux.HandleFunc("/app.js", func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		v := a.version
		a.mu.Unlock()
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		if v == 1 {
			_, _ = w.Write([]byte(appV1))
		} else {
			_, _ = w.Write([]byte(appV2))
		}
	})
	return a
}

func (a *deployableApp) deploy() {
	a.mu.Lock()
	a.version = 2
	a.mu.Unlock()
}

// The site deploys a new app.js (max-age one day, the same URL); the long-lived browser still
// holds the old one, which renders the new route /ready/42 as its NotFound (a declared 404).
// A render that looks wrong while some of its scripts came from the cache takes a second look
// with the cache bypassed, in the same Render call: the new route is rendered by the new code,
// and the result says it was cold. The second look refreshed the cache: the next new route
// needs none. A wrong-looking render with nothing from the cache, and a good one, get no second
// look.
func TestColdSecondLookAfterDeploy(t *testing.T) {
	s := newSite(t)
	app := newDeployableApp(s)
	s.mux.HandleFunc("/gone", http.NotFound)
	r := newRenderer(t, func(c *Options) { c.CacheMaxAge = 0 }) // no bound by age: only the second look may refresh it

	res := render1(t, r, render.Request{URL: s.url("/item/1")})
	if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), "Item 1") || s.count("/app.js") != 1 {
		t.Fatalf("before the deploy: %v %s, app.js fetched %d times: %.300s", res.Outcome, res.Err, s.count("/app.js"), res.Body)
	}
	app.deploy()

	res = render1(t, r, render.Request{URL: s.url("/ready/42")})
	if res.Outcome != outcome.OK || res.Status != 200 || !strings.Contains(string(res.Body), "Ready 42 (app v2)") {
		t.Errorf("a new route after the deploy: %v %d %s: %.300s", res.Outcome, res.Status, res.Err, res.Body)
	}
	if res.Signals == nil || !res.Signals.Cold {
		t.Errorf("the result does not say it was a cold look: %+v", res.Signals)
	}
	if got := s.count("/ready/42"); got != 2 {
		t.Errorf("the document was fetched %d times, want 2 (the first look and the second)", got)
	}
	if got := s.count("/app.js"); got != 2 {
		t.Errorf("app.js fetched %d times, want 2 (before the deploy, and by the second look)", got)
	}

	res = render1(t, r, render.Request{URL: s.url("/ready/43")})
	if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), "Ready 43 (app v2)") || res.Signals == nil || res.Signals.Cold {
		t.Errorf("the next new route: %v %s, signals %+v: %.300s", res.Outcome, res.Err, res.Signals, res.Body)
	}
	if got, docs := s.count("/app.js"), s.count("/ready/43"); got != 2 || docs != 1 {
		t.Errorf("the next new route: app.js fetched %d times in all (want 2), its document %d times (want 1)", got, docs)
	}

	res = render1(t, r, render.Request{URL: s.url("/gone")})
	if res.Outcome != outcome.NotFound || s.count("/gone") != 1 {
		t.Errorf("a 404 with nothing cached: %v, fetched %d times (want one look)", res.Outcome, s.count("/gone"))
	}
}

// render.chrome.cache_max_age bounds how long the browser uses a script it cached, by the
// renderer's clock: within it the script comes from the cache; past it the cache is cleared
// before the next render, once, and the script fetched again. 0 is no bound.
func TestCacheMaxAgeClearsTheCache(t *testing.T) {
	s := newSite(t)
	s.page("/page", `<!doctype html><html><body><script src="/lib.js"></script></body></html>`)
	s.mux.HandleFunc("/lib.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		_, _ = w.Write([]byte(`document.body.insertAdjacentHTML("beforeend", "<p id=lib>lib</p>")`))
	})
	r := newRenderer(t, func(c *Options) { c.CacheMaxAge = 10 * time.Minute })
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	r.now = func() time.Time { return time.Unix(0, clock.Load()) }
	r.mu.Lock()
	r.cur.cacheClearedAt = r.now()
	r.mu.Unlock()
	advance := func(d time.Duration) { clock.Add(int64(d)) }

	step := func(name string, want int) {
		t.Helper()
		res := render1(t, r, render.Request{URL: s.url("/page")})
		if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), `id="lib"`) {
			t.Errorf("%s: %v %s: %.200s", name, res.Outcome, res.Err, res.Body)
		}
		if got := s.count("/lib.js"); got != want {
			t.Errorf("%s: lib.js fetched %d times in all, want %d", name, got, want)
		}
	}
	step("first render", 1)
	advance(9 * time.Minute)
	step("within cache_max_age", 1)
	advance(2 * time.Minute)
	step("past cache_max_age", 2)
	step("just after the clear", 2)
	r.cfg.CacheMaxAge = 0 // no render is in flight
	advance(time.Hour)
	step("no bound", 2)
}

// An operator's recache or rush raises worker 0's cache epoch, which a render carries
// (render.Request.CacheEpoch): the first render that sees an epoch above the last the cache was
// cleared at clears it, and fetches the script again; the same epoch again does not.
func TestCacheEpochClearsTheCache(t *testing.T) {
	s := newSite(t)
	s.page("/page", `<!doctype html><html><body><script src="/lib.js"></script></body></html>`)
	s.mux.HandleFunc("/lib.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		_, _ = w.Write([]byte(`document.body.insertAdjacentHTML("beforeend", "<p id=lib>lib</p>")`))
	})
	r := newRenderer(t, func(c *Options) { c.CacheMaxAge = 0 })
	for i, c := range []struct {
		epoch uint64
		want  int
	}{{0, 1}, {0, 1}, {1, 2}, {1, 2}, {0, 2}, {3, 3}, {3, 3}} {
		res := render1(t, r, render.Request{URL: s.url("/page"), CacheEpoch: c.epoch})
		if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), `id="lib"`) {
			t.Errorf("render %d (epoch %d): %v %s", i, c.epoch, res.Outcome, res.Err)
		}
		if got := s.count("/lib.js"); got != c.want {
			t.Errorf("render %d (epoch %d): lib.js fetched %d times in all, want %d", i, c.epoch, got, c.want)
		}
	}
}
