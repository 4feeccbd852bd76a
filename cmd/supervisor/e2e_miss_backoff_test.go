package main

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// A page whose renders fail is not rendered again on every crawler request for it: once a
// render on miss has failed, the row waits out its failure backoff, and the requests that come
// meanwhile (a crawler retries a 503 or 502 again and again) are answered 503 with the
// backoff's remaining time in Retry-After and cost the origin nothing. Once the backoff has
// passed, the next request renders again.
func TestEndToEndMissOfAFailingPageKeepsItsBackoff(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	var hits atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "the site is down", http.StatusInternalServerError)
	}))
	t.Cleanup(origin.Close)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, ""), "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	page := origin.URL + "/broken"

	first := crawl(t, serveAddr, "/"+page)
	if first.code != http.StatusBadGateway {
		t.Fatalf("the first request for a page whose render fails: %d %s, want 502", first.code, first.body)
	}
	if h := hits.Load(); h != 1 {
		t.Fatalf("%d fetches at the origin after the first request, want 1", h)
	}
	var retryAfter int
	for i := range 5 {
		a := crawl(t, serveAddr, "/"+page)
		ra, err := strconv.Atoi(a.header.Get("Retry-After"))
		if a.code != http.StatusServiceUnavailable || err != nil || ra < 1 {
			t.Fatalf("request %d during the backoff: %d Retry-After %q %s, want 503 with the backoff's remaining seconds",
				i+2, a.code, a.header.Get("Retry-After"), a.body)
		}
		retryAfter = ra
	}
	if h := hits.Load(); h != 1 {
		t.Fatalf("%d fetches at the origin after 6 requests within the failure backoff, want 1", h)
	}

	n.advanceClock(time.Duration(retryAfter+1) * time.Second)
	waitFor(t, "a render once the backoff has passed", 30*time.Second, func() bool {
		crawl(t, serveAddr, "/"+page)
		return hits.Load() >= 2
	})
	t.Logf("%s: %d origin fetches; Retry-After %d s during the backoff", page, hits.Load(), retryAfter)
}
