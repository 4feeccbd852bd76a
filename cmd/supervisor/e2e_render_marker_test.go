package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A render can be told from a visitor at the site: the requests a render makes for the page
// carry X-Prerender: 1 (the header prerender middlewares skip to avoid loops, and sites filter
// analytics by), and its User-Agent ends with render.user_agent_suffix, on every device (the
// mobile device's agent here is a stock Android Chrome one, as an operator may set it).
func TestEndToEndRendersAreMarked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	type seen struct{ marker, agent string }
	var mu sync.Mutex
	got := map[string]seen{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path] = seen{r.Header.Get("X-Prerender"), r.UserAgent()}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<!doctype html><title>page</title><p>page</p>"))
	}))
	t.Cleanup(origin.Close)
	const stockMobile = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36"
	serveAddr := freePort(t)
	yaml := fmt.Sprintf(`queue: {ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: http
  timeout: 20s
  domains: ["127.0.0.1"]
  user_agents: {mobile: %q}
  user_agent_suffix: "shop-prerender/2"
serve:
  listen: %s
  tokens: [crawl-token]
  wait: 20s
`, stockMobile, serveAddr)
	n := startNode(t, t.TempDir(), 2, yaml, "")
	waitFor(t, "ready", 30*time.Second, n.ready)

	const googlebotMobile = "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	for path, ua := range map[string]string{"/desktop": "", "/mobile": googlebotMobile} {
		var extra []string
		if ua != "" {
			extra = []string{"User-Agent", ua}
		}
		if a := crawl(t, serveAddr, "/"+origin.URL+path, extra...); a.code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, a.code, a.body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/desktop", "/mobile"} {
		s := got[path]
		if s.marker != "1" || !strings.HasSuffix(s.agent, " shop-prerender/2") {
			t.Errorf("the render of %s sent X-Prerender %q and User-Agent %q, want 1 and one ending with the suffix", path, s.marker, s.agent)
		}
	}
	if !strings.HasPrefix(got["/mobile"].agent, stockMobile) {
		t.Errorf("the mobile render's User-Agent %q is not the configured one with the suffix", got["/mobile"].agent)
	}
}
