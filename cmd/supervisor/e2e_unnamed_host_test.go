package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A crawler's request for a site under a host the configuration does not name (the site is
// reached as localhost:PORT, configured as 127.0.0.1) is never told the page does not exist:
// prerender-node relays whatever status freshq answers, and a 404 drops a real page from an
// index. freshq answers 503 with a long Retry-After (a configuration to fix, not a page gone),
// files nothing and fetches nothing; the same site under its configured host is served.
func TestEndToEndUnnamedHostIsNotANotFound(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := npmInstall(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, ""), "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	site := expressSite(t, dir, serveAddr, "crawl-token") // http://127.0.0.1:PORT
	unnamed := strings.Replace(site, "127.0.0.1", "localhost", 1)

	a := visit(t, unnamed, "/p/elsewhere", googlebot)
	if a.code != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Fatalf("a crawler through the site under a host render.domains does not name: %d Retry-After %q %q, want 503 with Retry-After",
			a.code, a.header.Get("Retry-After"), a.body)
	}
	if n.stored(t, unnamed+"/p/elsewhere") || siteHits(t, site, "/p/elsewhere") != 0 {
		t.Fatal("the refused request filed or rendered its page")
	}
	if b := visit(t, site, "/p/named", googlebot); b.code != http.StatusOK {
		t.Fatalf("the same site under its configured host: %d %q", b.code, b.body)
	}
}
