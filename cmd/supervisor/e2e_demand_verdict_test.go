package main

import (
	"net/netip"
	"testing"
	"time"

	"github.com/freshq/freshq/testkit/testdns"
	"github.com/freshq/freshq/wire"
)

// A page's request rate, which orders the scarce renders under the freshness policy, moves
// only for requests whose claim was verified, when the crawler listener verifies claimed
// crawlers (serve.client_ip_header set: serve.verify_crawlers' default). Two pages are stored
// by misses of a client that claims no crawler (rendered, not counted): a-spoofed and
// b-verified. a-spoofed then gets 40 requests of a "Googlebot" from an address Google's DNS does
// not confirm (after its lookup came back unverified), 40 of a browser's User-Agent and 40 of
// a claimed GPTBot (a family that documents no verification); b-verified gets 5 of the verified
// Googlebot. Once b-verified's rate is written (requests counted, freshness.demand_flush 1s),
// a-spoofed's is still its route's prior, as before the 120 requests: the flush writes its keys
// in order, a-spoofed's before b-verified's, so a count of a-spoofed's would have landed first.
func TestEndToEndDemandCountsOnlyVerifiedCrawlers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	z := &testdns.Zone{
		Addrs: map[string][]netip.Addr{"crawl-66-249-66-1.googlebot.com": {e2eGoogleIP}},
		Names: map[netip.Addr][]string{e2eGoogleIP: {"crawl-66-249-66-1.googlebot.com."}, e2eImpostorIP: {"dsl-7.example.net."}},
	}
	n, origin, serveAddr := verifyingNode(t, z, "5s", "freshness: {demand_flush: 1s}\n")

	const browser = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
	const gptbot = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"
	lookups := func() float64 {
		return n.metrics()[`freshq_serve_verify_lookups_total{outcome="answered"}`]
	}

	// The verified Googlebot's address: verified by its miss (a render of a third page), the
	// verdict cached for its hits.
	if a := crawl(t, serveAddr, "/"+origin.URL+"/p/warm", "X-Forwarded-For", e2eGoogleIP.String()); a.code != 200 || a.header.Get("X-Freshq-Cache") != "miss" {
		t.Fatalf("a verified Googlebot's miss: %d %v %.200q", a.code, a.header, a.body)
	}
	spoofed, verified := origin.URL+"/p/a-spoofed", origin.URL+"/p/b-verified"
	for _, u := range []string{spoofed, verified} {
		if a := crawl(t, serveAddr, "/"+u, "User-Agent", browser); a.code != 200 || a.header.Get("X-Freshq-Cache") != "miss" {
			t.Fatalf("a miss of %s claiming no crawler: %d %v %.200q", u, a.code, a.header, a.body)
		}
	}
	before := freshnessOf(t, n, spoofed)

	// The impostor's first request is answered pending; its lookup comes back unverified.
	answered := lookups()
	if a := crawl(t, serveAddr, "/"+spoofed, "X-Forwarded-For", e2eImpostorIP.String()); a.code != 200 {
		t.Fatalf("the impostor's first request: %d %.200q", a.code, a.body)
	}
	waitFor(t, "the impostor's lookup answered", 10*time.Second, func() bool { return lookups() == answered+1 })
	for _, spoof := range []struct{ what, ua string }{
		{"an unverified Googlebot", crawlerUA}, {"a browser", browser}, {"a claimed GPTBot", gptbot},
	} {
		for i := range 40 {
			if a := crawl(t, serveAddr, "/"+spoofed, "User-Agent", spoof.ua, "X-Forwarded-For", e2eImpostorIP.String()); a.code != 200 || a.header.Get("X-Freshq-Cache") != "hit" {
				t.Fatalf("%s, request %d: %d %v %.200q", spoof.what, i, a.code, a.header, a.body)
			}
		}
	}
	m := n.metrics()
	if got := m[`freshq_serve_requests_total{code="200",family="google",result="hit",verification="unverified"}`]; got != 40 {
		t.Fatalf("hits of the unverified Googlebot: %v, want 40; serve series: %v", got, pick(m, "freshq_serve_requests_total"))
	}

	for i := range 5 {
		if a := crawl(t, serveAddr, "/"+verified, "X-Forwarded-For", e2eGoogleIP.String()); a.code != 200 || a.header.Get("X-Freshq-Cache") != "hit" {
			t.Fatalf("the verified Googlebot, request %d: %d %v %.200q", i, a.code, a.header, a.body)
		}
	}
	var moved wire.Freshness
	waitFor(t, "the verified Googlebot's requests written", 30*time.Second, func() bool {
		moved = freshnessOf(t, n, verified)
		return !moved.RequestsPrior
	})
	after := freshnessOf(t, n, spoofed)
	t.Logf("a-spoofed before: %v/h (prior %v); after 120 spoofed requests: %v/h (prior %v); b-verified after 5 verified: %v/h",
		before.RequestsPerHour, before.RequestsPrior, after.RequestsPerHour, after.RequestsPrior, moved.RequestsPerHour)
	if !before.RequestsPrior || !after.RequestsPrior || after.RequestsPerHour != before.RequestsPerHour {
		t.Fatalf("a-spoofed's request rate moved: %v/h (prior %v) before, %v/h (prior %v) after 120 requests of spoofed or unclaimed crawlers; want the route's prior throughout",
			before.RequestsPerHour, before.RequestsPrior, after.RequestsPerHour, after.RequestsPrior)
	}
}

// freshnessOf is GET /v1/targets' freshness explanation of u (desktop).
func freshnessOf(t *testing.T, n *node, u string) wire.Freshness {
	t.Helper()
	ex, code := n.explain(u)
	if code != 200 || ex.Freshness == nil {
		t.Fatalf("explain %s: %d %+v", u, code, ex)
	}
	return *ex.Freshness
}
