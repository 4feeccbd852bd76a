package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A page whose render declares a 404 reaches the crawler as the site made it: the rendered
// 404 page itself (not a stock body), with its ETag and Age, marked miss on the request that
// rendered it and hit after, and from the store without another render.
func TestEndToEndDeclared404KeepsItsPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSiteOrigin(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, ""), "")
	waitFor(t, "ready", 30*time.Second, n.ready)

	first := crawl(t, serveAddr, "/"+origin.URL+"/gone")
	if first.code != http.StatusNotFound || !strings.Contains(first.body, "<p>gone</p>") ||
		first.header.Get("X-Freshq-Cache") != "miss" || first.header.Get("ETag") == "" {
		t.Fatalf("the request that rendered the declared 404: %d %v %q, want the site's own 404 page, a miss with an ETag",
			first.code, first.header, first.body)
	}
	second := crawl(t, serveAddr, "/"+origin.URL+"/gone")
	if second.code != http.StatusNotFound || second.body != first.body || second.header.Get("X-Freshq-Cache") != "hit" ||
		second.header.Get("Age") == "" || second.header.Get("ETag") != first.header.Get("ETag") {
		t.Fatalf("the next request: %d %v %q, want the same 404 page from the store, a hit with its Age", second.code, second.header, second.body)
	}
	if h := origin.hitsOf("/gone"); h != 1 {
		t.Fatalf("the origin rendered /gone %d times for two crawler requests, want 1", h)
	}
}
