package serve

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/freshq/freshq/crawlers"
	"github.com/freshq/freshq/testkit/testdns"
)

var verifyYAML = strings.Replace(baseYAML, "  miss_rate: 1\n", "  miss_rate: 1\n  client_ip_header: X-Forwarded-For\n  verify:\n    cache_ttl: 1h\n", 1)

const googlebot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"

var (
	googleIP   = netip.MustParseAddr("66.249.66.1")
	impostorIP = netip.MustParseAddr("203.0.113.7")
)

// verifyingNode is a node whose claimed crawlers are verified against a zone the test holds:
// 66.249.66.1 is crawl-66-249-66-1.googlebot.com both ways, 203.0.113.7 is someone else's.
func verifyingNode(t *testing.T) (*node, *crawlers.Tally) {
	z := &testdns.Zone{
		Addrs: map[string][]netip.Addr{"crawl-66-249-66-1.googlebot.com": {googleIP}},
		Names: map[netip.Addr][]string{googleIP: {"crawl-66-249-66-1.googlebot.com."}, impostorIP: {"dsl-7.example.net."}},
	}
	res := testdns.Resolver(testdns.Listen(t, z))
	tally := &crawlers.Tally{}
	n := newNode(t, verifyYAML, func(d *HandlerDeps) {
		d.Verifier = crawlers.NewVerifier(res, crawlers.Options{Timeout: time.Second, Concurrency: 4, CacheEntries: 100, CacheTTL: time.Hour}, nil)
		d.Tally = tally
	})
	return n, tally
}

// A request that claims Googlebot from an address Google's DNS does not confirm gets a stored
// page as anyone does (without waiting for the address's first lookup: counted pending), and
// for a page not stored a 503 naming User-Agent with the Retry-After of its verdict, and
// nothing filed: no render for a claim anyone can write. Counted by family and verification,
// in the metrics and the tally.
func TestUnverifiedCrawlerGetsStoredPagesAndNoRender(t *testing.T) {
	n, tally := verifyingNode(t)
	n.file(t, page)
	n.render(t, "desktop|"+page, "ok", 200, "<html>stored</html>", nil)
	a := n.get("/"+page, "User-Agent", googlebot, "X-Forwarded-For", impostorIP.String())
	if a.code != 200 || a.body != "<html>stored</html>" || a.header.Get(HeaderCache) != "hit" {
		t.Fatalf("an unverified Googlebot asking for a stored page: %d %v %q", a.code, a.header, a.body)
	}
	rows := len(n.AllRows())
	a = n.get("/https://shop.test/not-stored", "User-Agent", googlebot, "X-Forwarded-For", impostorIP.String())
	if e := errorOf(t, a); a.code != 503 || e.Field != "User-Agent" || a.header.Get("Retry-After") != "3600" {
		t.Fatalf("an unverified Googlebot asking for a page not stored: %d %v %+v", a.code, a.header, e)
	}
	if got := len(n.AllRows()); got != rows {
		t.Fatalf("an unverified Googlebot's miss filed %d rows", got-rows)
	}
	if got := testutil.ToFloat64(n.h.d.Metrics.requests.WithLabelValues(ResultHit, "200", crawlers.Google, crawlers.Pending)); got != 1 {
		t.Fatalf("freshq_serve_requests_total{hit,200,google,pending} = %v", got)
	}
	if got := testutil.ToFloat64(n.h.d.Metrics.requests.WithLabelValues(ResultMiss, "503", crawlers.Google, crawlers.Unverified)); got != 1 {
		t.Fatalf("freshq_serve_requests_total{miss,503,google,unverified} = %v", got)
	}
	rs := tally.Rows()
	if len(rs) != 2 || rs[0].Family != crawlers.Google || rs[0].Verification != crawlers.Unverified || rs[0].Requests != 1 || rs[0].Refused != 1 ||
		rs[1].Family != crawlers.Google || rs[1].Verification != crawlers.Pending || rs[1].Requests != 1 || rs[1].Hit != 1 {
		t.Fatalf("the tally: %+v", rs)
	}
	// Verified, the same miss is one to render: filed, and waiting for it (the wait's end is a 503
	// with Retry-After: 5, the render going on).
	done := n.async("/https://shop.test/not-stored", "User-Agent", googlebot, "X-Forwarded-For", "198.51.100.1, "+googleIP.String())
	waitFor(t, "the verified Googlebot's miss filed", func() bool { return len(n.AllRows()) > rows })
	n.timeout <- time.Now()
	if a := <-done; a.code != 503 || a.header.Get("Retry-After") != "5" {
		t.Fatalf("a verified Googlebot's miss, its wait ended: %d %v %q", a.code, a.header, a.body)
	}
}

// A client-address header is believed only from a trusted proxy: from another peer the peer
// is the client, however the header says Google.
func TestClientAddressHeaderFromAnUntrustedPeerIgnored(t *testing.T) {
	z := &testdns.Zone{Addrs: map[string][]netip.Addr{"crawl-66-249-66-1.googlebot.com": {googleIP}},
		Names: map[netip.Addr][]string{googleIP: {"crawl-66-249-66-1.googlebot.com."}}}
	res := testdns.Resolver(testdns.Listen(t, z))
	n := newNode(t, strings.Replace(verifyYAML, "  client_ip_header:", "  trusted_proxies: [10.0.0.0/8]\n  client_ip_header:", 1), func(d *HandlerDeps) {
		d.Verifier = crawlers.NewVerifier(res, crawlers.Options{Timeout: time.Second, Concurrency: 4, CacheEntries: 100, CacheTTL: time.Hour}, nil)
	})
	a := n.get("/https://shop.test/forged", "User-Agent", googlebot, "X-Forwarded-For", googleIP.String())
	if e := errorOf(t, a); a.code != 503 || e.Field != "User-Agent" {
		t.Fatalf("a forged X-Forwarded-For from an untrusted peer: %d %+v, want the peer unverified", a.code, e)
	}
	n.nothingWritten(t, "a forged client address")
}

// However many User-Agents and addresses come, freshq_serve_requests_total's family and
// verification labels take their values from a fixed set.
func TestRequestLabelsBounded(t *testing.T) {
	n, _ := verifyingNode(t)
	n.file(t, page)
	n.render(t, "desktop|"+page, "ok", 200, "<html>stored</html>", nil)
	for i := range 300 {
		ua := fmt.Sprintf("Mozilla/5.0 (compatible; Bot-%d/%x; +https://x%d.test)", i, i*7919, i)
		if i%3 == 0 {
			ua = fmt.Sprintf("Googlebot/%d", i)
		}
		n.get("/"+page, "User-Agent", ua, "X-Forwarded-For", fmt.Sprintf("198.51.%d.%d", i/250, i%250))
	}
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	families := append(slices.Clone(crawlers.Families), crawlers.None)
	for _, mf := range mfs {
		if mf.GetName() != "freshq_serve_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "family" && !slices.Contains(families, l.GetValue()) ||
					l.GetName() == "verification" && !slices.Contains(crawlers.Verdicts, l.GetValue()) {
					t.Fatalf("label %s=%q is outside the bounded set", l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// waitFor polls cond until it holds, failing after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
