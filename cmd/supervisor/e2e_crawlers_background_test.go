package main

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/testkit/testdns"
)

// A claimed Googlebot asking for a stored page is answered at once, whatever its lookup is
// doing: its address's reverse lookup is held by the test's DNS server, and the page comes
// back while that lookup is still held and has not ended (no verification lookup counted by
// any outcome), labelled pending. Released, the lookup the request started in the background
// confirms the address, and a later miss from it is rendered on that cached verdict without
// asking DNS again. serve.verify.timeout is long (15s) so that only the order of events, never
// a clock, tells a request that waited for its lookup from one that did not.
func TestEndToEndCrawlerStoredPageDoesNotWaitForItsLookup(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	slow := netip.MustParseAddr("66.249.66.3") // Google's, once its held lookup is released
	z := &testdns.Zone{
		Addrs: map[string][]netip.Addr{"crawl-66-249-66-1.googlebot.com": {e2eGoogleIP}, "crawl-66-249-66-3.googlebot.com": {slow}},
		Names: map[netip.Addr][]string{e2eGoogleIP: {"crawl-66-249-66-1.googlebot.com."}, slow: {"crawl-66-249-66-3.googlebot.com."}},
		Hang:  map[netip.Addr]bool{slow: true},
	}
	n, origin, serveAddr := verifyingNode(t, z, "15s", "")

	stored := "/" + origin.URL + "/p/stored"
	if a := crawl(t, serveAddr, stored, "X-Forwarded-For", e2eGoogleIP.String()); a.code != 200 || a.header.Get("X-Freshq-Cache") != "miss" {
		t.Fatalf("a verified Googlebot's miss storing the page: %d %v %.200q", a.code, a.header, a.body)
	}
	lookups := func() map[string]float64 { return pick(n.metrics(), "freshq_serve_verify_lookups_total") }
	ended := func(m map[string]float64) (sum float64) {
		for _, v := range m {
			sum += v
		}
		return sum
	}
	before := ended(lookups()) // the verified address's one

	// The stored page, for the address whose lookup the server holds.
	a := crawl(t, serveAddr, stored, "X-Forwarded-For", slow.String())
	if a.code != 200 || a.header.Get("X-Freshq-Cache") != "hit" || !strings.Contains(a.body, "rendered /p/stored") {
		t.Fatalf("a claimed Googlebot asking for a stored page while its lookup is held: %d %v %.200q", a.code, a.header, a.body)
	}
	select {
	case <-z.Released():
		t.Fatal("the held lookup was released before the answer came")
	default:
	}
	if m := lookups(); ended(m) != before {
		t.Fatalf("verification lookups ended before the stored page was answered: %v (%v before): the request waited for its lookup", m, before)
	}
	m := n.metrics()
	if got := m[`freshq_serve_requests_total{code="200",family="google",result="hit",verification="pending"}`]; got != 1 {
		t.Fatalf("the stored page answered before its lookup: want it counted as pending; serve series: %v", pick(m, "freshq_serve_requests_total"))
	}
	// The lookup it started runs on: the server holds its query.
	waitFor(t, "the background lookup's query held", 10*time.Second, func() bool { return z.Held() == 1 })

	z.Release()
	waitFor(t, "the background lookup answered", 10*time.Second, func() bool {
		return lookups()[`freshq_serve_verify_lookups_total{outcome="answered"}`] == before+1
	})
	queries := z.Queries()

	// A miss from the same address: rendered on the verdict the background lookup cached.
	fresh := "/" + origin.URL + "/p/fresh"
	if a := crawl(t, serveAddr, fresh, "X-Forwarded-For", slow.String()); a.code != 200 || a.header.Get("X-Freshq-Cache") != "miss" || !strings.Contains(a.body, "rendered /p/fresh") {
		t.Fatalf("a miss from the address the background lookup verified: %d %v %.200q", a.code, a.header, a.body)
	}
	if got := z.Queries(); got != queries {
		t.Fatalf("the miss asked DNS %d more times, want the cached verdict used", got-queries)
	}
	if m := lookups(); ended(m) != before+1 {
		t.Fatalf("verification lookups: %v, want only the background one since the first", m)
	}
	m = n.metrics()
	if got := m[`freshq_serve_requests_total{code="200",family="google",result="miss",verification="verified"}`]; got != 2 {
		t.Fatalf("verified misses: %v, want 2; serve series: %v", got, pick(m, "freshq_serve_requests_total"))
	}
}
