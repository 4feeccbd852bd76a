package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// One site's misses cannot hold every request slot of render on miss: with page.max_waiters 8,
// crawler requests for a site whose origin hangs hold at most the site's share
// (page.max_site_waiters, ⌈8 ÷ 4⌉ = 2 by default), the rest of that site's misses are refused
// at once with 503 and Retry-After, and a crawler of another site is rendered meanwhile.
func TestEndToEndOneSiteCannotHoldEveryWaiter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSlowOrigin(t) // answers only once let go
	other := newSiteOrigin(t)
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, fmt.Sprintf(`queue: {ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
page: {max_waiters: 8}
render:
  renderer: http
  timeout: 20s
  domains: ["127.0.0.1", "localhost"]
serve:
  listen: %s
  tokens: [crawl-token]
  wait: 20s
`, serveAddr), "")
	waitFor(t, "ready", 30*time.Second, n.ready)

	var wg sync.WaitGroup
	answers := make(chan crawlAnswer, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers <- crawl(t, serveAddr, fmt.Sprintf("/%s/slow/%d", origin.URL, i))
		}()
	}
	refused := 0
	waitFor(t, "the slow site's misses held or refused", 20*time.Second, func() bool {
		for {
			select {
			case a := <-answers:
				if a.code != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
					t.Fatalf("a slow site's miss past its share: %d %v %q, want 503 with Retry-After", a.code, a.header, a.body)
				}
				refused++
			default:
				return refused == 6 && n.waiters() == 2
			}
		}
	})
	a := crawl(t, serveAddr, "/"+otherURL+"/p/1")
	if a.code != http.StatusOK || !strings.Contains(a.body, "rendered /p/1") {
		t.Fatalf("another site's miss while the slow site's wait: %d %q, want its page", a.code, a.body)
	}
	origin.letGo()
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.code != http.StatusOK {
			t.Fatalf("a slow site's held miss once the origin answered: %d %q", a.code, a.body)
		}
	}
}
