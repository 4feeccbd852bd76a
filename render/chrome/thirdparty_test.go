package chrome

import (
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/testkit/testdns"
)

// Third parties' analytics and ads are refused by default (render.chrome.block's
// default), as are fonts (render.chrome.block_types'), and counted; an entry of
// render.chrome.allow lets what it names load for the pages whose path it matches only: a
// resource type lifts that block_types entry, a URL pattern lets matching URLs through
// render.chrome.block and block_types both. The first entry whose match takes the page's path is
// the page's, as routes match: one before it that loads nothing allows nothing.
func TestThirdPartyBlockedByDefaultAllowedByPath(t *testing.T) {
	s := newSite(t)
	s.mux.HandleFunc("/analytics.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write([]byte(`document.body.insertAdjacentHTML("beforeend", "<p id=tracked>tracked</p>")`))
	})
	s.mux.HandleFunc("/ads.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write([]byte(`window.ads = 1`))
	})
	s.mux.HandleFunc("/f.woff2", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "font/woff2")
		_, _ = w.Write([]byte("not really a font"))
	})
	page := `<!doctype html><html><body><p id=own>own</p>
<script src="` + s.on("sb.scorecardresearch.com", "/analytics.js") + `"></script>
<script src="` + s.on("cdn.taboola.com", "/ads.js") + `"></script>
<script>new FontFace("A", "url(/f.woff2)").load().catch(() => {})</script></body></html>`
	for _, p := range []string{"/product/1", "/landing/1", "/landing/plain"} {
		s.page(p, page)
	}
	var mu sync.Mutex
	reasons := map[string]int{}
	// Not newRenderer: the third parties' names resolve to the test's origin too. (Not Google's:
	// their names are HSTS-preloaded in Chromium, which would ask the plain-HTTP origin in https.)
	needChromium(t)
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	testdns.Use(t, map[string][]netip.Addr{"site.test": lo, "sb.scorecardresearch.com": lo, "cdn.taboola.com": lo})
	cfg := testCfg()
	cfg.Domains = []string{"site.test", "sb.scorecardresearch.com", "cdn.taboola.com"}
	cfg.Allow = []Allow{
		{Match: "exact", Path: "/landing/plain"},
		{Match: "prefix", Path: "/landing/", Types: []string{"font"}, Patterns: []string{"*://sb.scorecardresearch.com*/*"}},
	}
	r, err := New(cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.hooks.Blocked = func(reason string) { mu.Lock(); reasons[reason]++; mu.Unlock() }
	hits := func() [3]int { return [3]int{s.count("/analytics.js"), s.count("/ads.js"), s.count("/f.woff2")} }

	for _, c := range []struct {
		path    string
		loaded  [3]int // analytics, ads, font requests this render
		tracked bool
	}{
		{"/product/1", [3]int{0, 0, 0}, false},
		{"/landing/plain", [3]int{0, 0, 0}, false},
		{"/landing/1", [3]int{1, 0, 1}, true},
	} {
		before := hits()
		mu.Lock()
		clear(reasons)
		mu.Unlock()
		res := render1(t, r, render.Request{URL: s.url(c.path)})
		if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), `<p id="own">own</p>`) {
			t.Fatalf("%s: %v %s: %.300s", c.path, res.Outcome, res.Err, res.Body)
		}
		after := hits()
		got := [3]int{after[0] - before[0], after[1] - before[1], after[2] - before[2]}
		if got != c.loaded {
			t.Errorf("%s: analytics, ads, font requested %v times, want %v", c.path, got, c.loaded)
		}
		if tracked := strings.Contains(string(res.Body), `id="tracked"`); tracked != c.tracked {
			t.Errorf("%s: the analytics script ran: %v, want %v", c.path, tracked, c.tracked)
		}
		mu.Lock()
		wantPattern, wantType := 2-c.loaded[0]-c.loaded[1], 1-c.loaded[2]
		if reasons["pattern"] != wantPattern || reasons["type"] != wantType {
			t.Errorf("%s: refusals counted %v, want %d by pattern and %d by type", c.path, reasons, wantPattern, wantType)
		}
		mu.Unlock()
	}
}
