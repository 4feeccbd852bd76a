package chrome

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// A site whose script throws on every load, cached or not: the first render that used the cached
// script looks wrong and takes its cold second look, which finds the same (the cache did not
// explain it). The browser remembers that for the site, and its next renders with the same
// reasons are rendered once, still reporting the exception. A render of the site that looks wrong
// for other reasons (its data request failed as well) still gets its second look.
func TestSecondLookNotRepeatedWhereTheColdLookChangedNothing(t *testing.T) {
	s := newSite(t)
	shell := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write([]byte(`<!doctype html><html><body><div id=app>Loading…</div><script src="/throws.js"></script></body></html>`))
	}
	s.mux.HandleFunc("/p/", shell)
	s.mux.HandleFunc("/throws.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		_, _ = w.Write([]byte(`document.getElementById("app").textContent = "Page " + location.pathname; throw new Error("always broken")`))
	})
	s.mux.HandleFunc("/api/down", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	s.page("/q/1", `<!doctype html><html><body><div id=app>Loading…</div><script src="/throws.js"></script>
<script>fetch("/api/down").catch(() => {})</script></body></html>`)
	r := newRenderer(t, func(c *Options) { c.CacheMaxAge = 0 })

	for i, want := range []struct {
		renders int
		cold    bool
	}{
		{1, false}, // nothing came from the cache: no second look
		{2, true},  // the cached script threw: the cold look, which threw as well
		{1, false}, // the same reasons: no second look
		{1, false},
	} {
		path := fmt.Sprintf("/p/%d", i+1)
		res := render1(t, r, render.Request{URL: s.url(path)})
		if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), "Page "+path) {
			t.Errorf("%s: %v %s: %.300s", path, res.Outcome, res.Err, res.Body)
		}
		if res.Signals == nil || res.Signals.Exceptions != 1 || res.Signals.Cold != want.cold || !evidenceHas(res.Signals, "always broken") {
			t.Errorf("%s: signals %+v, want 1 exception, cold %v", path, res.Signals, want.cold)
		}
		if got := s.count(path); got != want.renders {
			t.Errorf("%s was rendered %d times, want %d", path, got, want.renders)
		}
	}

	res := render1(t, r, render.Request{URL: s.url("/q/1")})
	if res.Signals == nil || res.Signals.Exceptions != 1 || res.Signals.FailedRequests != 1 || !res.Signals.Cold {
		t.Errorf("other reasons (an exception and a failed request): signals %+v, want a cold second look", res.Signals)
	}
	if got := s.count("/q/1"); got != 2 {
		t.Errorf("other reasons: /q/1 rendered %d times, want 2", got)
	}
}

// What a second look found is kept only until the browser's cache is next cleared (by
// render.chrome.cache_max_age, or a new cache epoch): after that, a site the browser had
// stopped looking at twice gets its second look again, and a deploy under the same script URL
// reaches a new route through it.
func TestSecondLookAgainAfterTheCacheIsCleared(t *testing.T) {
	for _, how := range []string{"cache epoch", "cache_max_age"} {
		t.Run(how, func(t *testing.T) {
			s := newSite(t)
			app := newDeployableApp(s)
			r := newRenderer(t, func(c *Options) { c.CacheMaxAge = 0 })
			var clock atomic.Int64
			clock.Store(time.Now().UnixNano())
			r.now = func() time.Time { return time.Unix(0, clock.Load()) }
			r.mu.Lock()
			r.cur.cacheClearedAt = r.now()
			r.mu.Unlock()
			var epoch uint64
			renderPath := func(path string) render.Result {
				t.Helper()
				return render1(t, r, render.Request{URL: s.url(path), CacheEpoch: epoch})
			}

			renderPath("/item/1") // app.js v1 cached
			// v1 does not know /ready/ routes: its NotFound, a declared 404, with the cached script
			// and without it.
			res := renderPath("/ready/1")
			if res.Outcome != outcome.NotFound || res.Signals == nil || !res.Signals.Cold || s.count("/ready/1") != 2 {
				t.Fatalf("/ready/1: %v, signals %+v, rendered %d times (want a cold second look, not found)", res.Outcome, res.Signals, s.count("/ready/1"))
			}
			res = renderPath("/ready/2")
			if res.Outcome != outcome.NotFound || res.Signals == nil || res.Signals.Cold || s.count("/ready/2") != 1 {
				t.Fatalf("/ready/2: %v, signals %+v, rendered %d times (want once: the last cold look found the same)", res.Outcome, res.Signals, s.count("/ready/2"))
			}

			switch how {
			case "cache epoch":
				epoch = 1
			case "cache_max_age":
				r.mu.Lock()
				r.cfg.CacheMaxAge = 10 * time.Minute // no render is in flight
				r.mu.Unlock()
				clock.Add(int64(11 * time.Minute))
			}
			res = renderPath("/item/2")
			// app.js: by /item/1, by the cold look at /ready/1, and now from a cleared cache.
			if res.Outcome != outcome.OK || s.count("/app.js") != 3 {
				t.Fatalf("after the clear: %v %s, app.js fetched %d times in all (want 3: the cache was cleared)", res.Outcome, res.Err, s.count("/app.js"))
			}
			app.deploy() // the browser holds v1 again

			res = renderPath("/ready/42")
			if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), "Ready 42 (app v2)") || res.Signals == nil || !res.Signals.Cold {
				t.Errorf("a new route after the deploy: %v %s, signals %+v: %.300s", res.Outcome, res.Err, res.Signals, res.Body)
			}
			if got := s.count("/ready/42"); got != 2 {
				t.Errorf("/ready/42 rendered %d times, want 2 (a second look)", got)
			}
		})
	}
}

// A site whose cold second looks fix what the cached scripts got wrong keeps getting them:
// deploy after deploy, a new route is rendered by the new code.
func TestSecondLookKeptWhereTheColdLookFixedIt(t *testing.T) {
	s := newSite(t)
	var mu sync.Mutex
	version := 1
	s.mux.HandleFunc("/r/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write([]byte(`<!doctype html><html><head></head><body><div id=app>Loading…</div><script src="/app.js"></script></body></html>`))
	})
	// Version n of the app knows the routes /r/1 to /r/n; a later one is its NotFound.
	s.mux.HandleFunc("/app.js", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		v := version
		mu.Unlock()
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		fmt.Fprintf(w, `const app = document.getElementById("app"); const k = Number(location.pathname.slice(3));
if (k <= %d) { app.textContent = "Route " + k + " (app v%d)" } else {
  const m = document.createElement("meta"); m.name = "prerender-status-code"; m.content = "404"; document.head.appendChild(m);
  app.textContent = "NotFound" }`, v, v)
	})
	r := newRenderer(t, func(c *Options) { c.CacheMaxAge = 0 })

	res := render1(t, r, render.Request{URL: s.url("/r/1")})
	if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), "Route 1 (app v1)") {
		t.Fatalf("/r/1: %v %s: %.300s", res.Outcome, res.Err, res.Body)
	}
	for k := 2; k <= 4; k++ {
		mu.Lock()
		version = k // a deploy
		mu.Unlock()
		path := fmt.Sprintf("/r/%d", k)
		res := render1(t, r, render.Request{URL: s.url(path)})
		if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), fmt.Sprintf("Route %d (app v%d)", k, k)) || res.Signals == nil || !res.Signals.Cold {
			t.Errorf("%s after deploy %d: %v %s, signals %+v: %.300s", path, k, res.Outcome, res.Err, res.Signals, res.Body)
		}
		if got := s.count(path); got != 2 {
			t.Errorf("%s rendered %d times, want 2 (a second look)", path, got)
		}
	}
}

// What second looks found is kept per site (the render.domains entry its host is under, else
// its host), for at most maxLookSites sites, the one written longest ago dropped first; a cold
// render that fixed or changed the result forgets the site; a look that ended without the page
// changes nothing; and a look begun before the cache was cleared is not kept after it.
func TestSecondLookFindingsBounded(t *testing.T) {
	r := &Renderer{now: time.Now}
	b := &browser{}
	thrown := render.Result{Outcome: outcome.OK, Status: 200, Signals: &render.Signals{Exceptions: 1}}
	fine := render.Result{Outcome: outcome.OK, Status: 200, Signals: &render.Signals{}}
	for _, c := range []struct{ raw, site string }{
		{"http://shop.example.com/p/1", "example.com"},
		{"http://api.example.com:8080/x", "example.com"},
		{"http://other.test/", "other.test"},
	} {
		u, _ := url.Parse(c.raw)
		if got := siteOf([]string{"cdn.test", " Example.com "}, u); got != c.site {
			t.Errorf("siteOf(%s) = %q, want %q", c.raw, got, c.site)
		}
	}

	for i := range maxLookSites + 1 {
		r.noteSecondLook(b, 0, fmt.Sprintf("site%d.test", i), thrown, thrown)
	}
	if r.skipSecondLook(b, "site0.test", wrongOf(thrown)) {
		t.Errorf("the site written longest ago is kept past %d sites", maxLookSites)
	}
	if !r.skipSecondLook(b, "site1.test", wrongOf(thrown)) || !r.skipSecondLook(b, fmt.Sprintf("site%d.test", maxLookSites), wrongOf(thrown)) {
		t.Errorf("a site within the bound is not kept")
	}
	if n := b.looks.order.Len(); n != maxLookSites || len(b.looks.sites) != maxLookSites {
		t.Errorf("%d sites in order, %d in the map; want %d", n, len(b.looks.sites), maxLookSites)
	}
	if r.skipSecondLook(b, "site1.test", wrongOf(fine)) {
		t.Errorf("a different result is skipped")
	}

	r.noteSecondLook(b, 0, "site1.test", thrown, render.Result{Outcome: outcome.Timeout})
	if !r.skipSecondLook(b, "site1.test", wrongOf(thrown)) {
		t.Errorf("a cold look that timed out changed what was kept")
	}
	r.noteSecondLook(b, 0, "site1.test", thrown, fine)
	if r.skipSecondLook(b, "site1.test", wrongOf(thrown)) {
		t.Errorf("a cold look that fixed the page did not turn second looks back on")
	}

	clearFirst, gen := r.cacheClear(b, 1)
	if !clearFirst || gen != 1 || b.looks != nil {
		t.Fatalf("a new cache epoch: clear %v, generation %d, second looks still kept: %v", clearFirst, gen, b.looks != nil)
	}
	r.noteSecondLook(b, 0, "site2.test", thrown, thrown) // begun before the clear
	if r.skipSecondLook(b, "site2.test", wrongOf(thrown)) {
		t.Errorf("a look begun before the cache was cleared is kept after it")
	}
}
