package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A crawler's request for something that is not a page (the site's JSON API, which
// prerender-node does not skip) gets it as the site sends it, through the middleware and the
// chrome renderer: its type and its body, never Chromium's JSON viewer served as text/html.
func TestEndToEndNonHTMLIsPassedThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	dir := npmInstall(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, fmt.Sprintf(`queue: {ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: chrome
  concurrency: 2
  timeout: 20s
  domains: ["127.0.0.1"]
  chrome: {idle: 200ms}
serve:
  listen: %s
  tokens: [crawl-token]
  wait: 20s
`, serveAddr), "")
	waitFor(t, "ready", 60*time.Second, n.ready)
	site := expressSite(t, dir, serveAddr, "crawl-token")

	for _, want := range []string{"miss", "hit"} {
		a := visit(t, site, "/api/products/1", googlebot)
		if a.code != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") ||
			a.body != `{"path":"/api/products/1","name":"Red shoes"}` || a.header.Get("X-Freshq-Cache") != want {
			t.Fatalf("a crawler asking the site's API (%s): %d %v %q, want the JSON as the site sends it", want, a.code, a.header, a.body)
		}
	}
}
