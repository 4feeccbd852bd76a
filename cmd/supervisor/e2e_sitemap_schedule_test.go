package main

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The sitemaps the configuration names (sitemap.urls) are read at start and again every
// sitemap.refetch, by the node's own clock: a page the site adds to its sitemap is filed (for
// every device) at the next read, and a page whose <lastmod> is later than its last render is
// rendered again then, long before its cadence, so the crawler gets the new content.
func TestEndToEndConfiguredSitemapsAreReadAgainAndLastmodCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	var mu sync.Mutex
	pages := map[string]string{"/p/0": "v1", "/p/1": "v1"}
	lastmod := map[string]string{}
	var origin *httptest.Server
	origin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/sitemap.xml" {
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
			for p := range pages {
				lm := ""
				if v := lastmod[p]; v != "" {
					lm = "<lastmod>" + v + "</lastmod>"
				}
				fmt.Fprintf(w, "<url><loc>%s%s</loc>%s</url>", origin.URL, p, lm)
			}
			fmt.Fprint(w, `</urlset>`)
			return
		}
		v, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!doctype html><title>%s</title><p>%s content %s</p>", r.URL.Path, r.URL.Path, v)
	}))
	t.Cleanup(origin.Close)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, fmt.Sprintf(`queue: {policy: ready, ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: http
  timeout: 20s
  domains: ["127.0.0.1"]
  default_interval: 48h
sitemap:
  urls: [%q]
  refetch: 1h
serve:
  listen: %s
  tokens: [crawl-token]
  wait: 20s
`, origin.URL+"/sitemap.xml", serveAddr), "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	waitFor(t, "the sitemap read at start", 30*time.Second, func() bool {
		return n.stored(t, origin.URL+"/p/0") && n.stored(t, origin.URL+"/p/1")
	})
	waitFor(t, "the pages rendered", 30*time.Second, func() bool {
		a := crawl(t, serveAddr, "/"+origin.URL+"/p/0")
		return a.code == http.StatusOK && strings.Contains(a.body, "content v1")
	})

	// The site changes /p/0 and says so in its sitemap, and adds /p/2.
	mu.Lock()
	pages["/p/0"], pages["/p/2"] = "v2", "v1"
	lastmod["/p/0"] = time.Now().Add(n.clockOffset() + 30*time.Minute).UTC().Format(time.RFC3339)
	mu.Unlock()
	n.advanceClock(time.Hour + time.Minute)
	waitFor(t, "the added page filed at the next read", 30*time.Second, func() bool { return n.stored(t, origin.URL+"/p/2") })
	waitFor(t, "/p/0 rendered again for its <lastmod>", 30*time.Second, func() bool {
		a := crawl(t, serveAddr, "/"+origin.URL+"/p/0")
		return a.code == http.StatusOK && strings.Contains(a.body, "content v2")
	})
}

// clockOffset is how far every process's clock is ahead of the wall clock (advanceClock).
func (n *node) clockOffset() time.Duration {
	b, err := os.ReadFile(n.clockF)
	if err != nil {
		n.t.Fatal(err)
	}
	return time.Duration(int64(binary.LittleEndian.Uint64(b))) * time.Millisecond
}
