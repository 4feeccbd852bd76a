package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/testkit/testdns"
	"github.com/freshq/freshq/wire"
)

// testDNSEnv is crawlers.TestDNSEnv: the DNS server a worker built with the testclock tag asks
// instead of the system's (a production build reads no such variable).
const testDNSEnv = "FRESHQ_TEST_DNS"

const crawlerUA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"

var (
	e2eGoogleIP   = netip.MustParseAddr("66.249.66.1")
	e2eImpostorIP = netip.MustParseAddr("203.0.113.7")
	e2eHangIP     = netip.MustParseAddr("203.0.113.9")
)

// crawlersNode is a node whose crawler listener takes the client's address from
// X-Forwarded-For sent by a loopback peer (127.0.0.1 only: 127.0.0.2 is an untrusted peer) and
// verifies claimed crawlers against a zone the test holds: 66.249.66.1 is
// crawl-66-249-66-1.googlebot.com both ways, 203.0.113.7's reverse name is not Google's, and
// 203.0.113.9's reverse lookup never answers.
func crawlersNode(t *testing.T) (*node, *siteOrigin, *testdns.Zone, string) {
	z := &testdns.Zone{
		Addrs: map[string][]netip.Addr{"crawl-66-249-66-1.googlebot.com": {e2eGoogleIP}},
		Names: map[netip.Addr][]string{e2eGoogleIP: {"crawl-66-249-66-1.googlebot.com."}, e2eImpostorIP: {"dsl-7.example.net."}},
		Hang:  map[netip.Addr]bool{e2eHangIP: true},
	}
	n, origin, serveAddr := verifyingNode(t, z, "500ms", "")
	return n, origin, z, serveAddr
}

// verifyingNode starts a node whose crawler listener takes the client's address from
// X-Forwarded-For sent by a loopback peer (127.0.0.1 only) and verifies claimed crawlers
// against zone z within verifyTimeout (serve.verify.timeout), with extra appended to its
// configuration, and returns it, its site's origin and its crawler listener's address.
func verifyingNode(t *testing.T, z *testdns.Zone, verifyTimeout, extra string) (*node, *siteOrigin, string) {
	t.Setenv(testDNSEnv, testdns.Listen(t, z))
	origin := newSiteOrigin(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, `  client_ip_header: X-Forwarded-For
  trusted_proxies: [127.0.0.1/32]
  miss_burst: 100
  verify: {timeout: `+verifyTimeout+`, concurrency: 16, cache_entries: 1000, cache_ttl: 1h}
`+extra), "")
	waitFor(t, "ready", 60*time.Second, n.ready)
	return n, origin, serveAddr
}

// A "Googlebot" is served by what its address is: from an address whose reverse name Google's
// DNS confirms, a page not stored is rendered on miss; from one whose reverse name is not
// Google's, a stored page is served as to anyone and a page not stored costs no render (503
// naming User-Agent, the origin sees nothing); a forged X-Forwarded-For from a peer that is no
// trusted proxy is ignored; a lookup that never answers is unverified at its timeout. The
// metrics and /v1/queue count them by family and verification.
func TestEndToEndCrawlersVerified(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n, origin, z, serveAddr := crawlersNode(t)

	// Verified: rendered on miss.
	stored := "/" + origin.URL + "/p/stored"
	if a := crawl(t, serveAddr, stored, "X-Forwarded-For", e2eGoogleIP.String()); a.code != 200 || a.header.Get("X-Freshq-Cache") != "miss" || !strings.Contains(a.body, "rendered /p/stored") {
		t.Fatalf("a verified Googlebot's miss: %d %v %.200q", a.code, a.header, a.body)
	}
	if got := origin.hitsOf("/p/stored"); got != 1 {
		t.Fatalf("the verified miss fetched the origin %d times, want 1", got)
	}

	// Unverified, a stored page: served, the origin not asked, without waiting for the
	// address's first lookup (counted pending; the lookup it starts caches the verdict).
	if a := crawl(t, serveAddr, stored, "X-Forwarded-For", "66.249.66.1, "+e2eImpostorIP.String()); a.code != 200 || a.header.Get("X-Freshq-Cache") != "hit" || !strings.Contains(a.body, "rendered /p/stored") {
		t.Fatalf("an unverified Googlebot asking for a stored page: %d %v %.200q", a.code, a.header, a.body)
	}

	// Unverified, a page not stored: no render.
	never := "/" + origin.URL + "/p/never"
	a := crawl(t, serveAddr, never, "X-Forwarded-For", e2eImpostorIP.String())
	if a.code != 503 || a.header.Get("Retry-After") != "3600" || !strings.Contains(a.body, `"field":"User-Agent"`) {
		t.Fatalf("an unverified Googlebot asking for a page not stored: %d %v %q", a.code, a.header, a.body)
	}

	// A forged X-Forwarded-For from 127.0.0.2, a peer that is no trusted proxy, naming the
	// address that verifies: the peer is the client, and it is not Google.
	c := dialFrom(t, "127.0.0.2", serveAddr)
	forged := "/" + origin.URL + "/p/forged"
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET "+forged+" HTTP/1.1\r\nHost: "+serveAddr+"\r\nX-Prerender-Token: crawl-token\r\nUser-Agent: "+crawlerUA+
		"\r\nX-Forwarded-For: "+e2eGoogleIP.String()+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"field":"User-Agent"`) {
		t.Fatalf("a forged X-Forwarded-For from an untrusted peer: %d %q, want it unverified", resp.StatusCode, body)
	}

	// A reverse lookup that never answers: unverified at serve.verify.timeout (the verifier's
	// own deadline ended it, counted as a timeout, not the resolver's giving up, a failure),
	// answered while the zone still holds the query.
	hang := "/" + origin.URL + "/p/hang"
	if a := crawl(t, serveAddr, hang, "X-Forwarded-For", e2eHangIP.String()); a.code != 503 || !strings.Contains(a.body, `"field":"User-Agent"`) {
		t.Fatalf("a Googlebot whose lookup hangs: %d %v %q", a.code, a.header, a.body)
	}
	select {
	case <-z.Released():
		t.Fatal("the held lookup was released before the answer came")
	default:
	}

	if m := n.metrics(); m[`freshq_serve_verify_lookups_total{outcome="timeout"}`] != 1 || m[`freshq_serve_verify_lookups_total{outcome="failed"}`] != 0 {
		t.Fatalf("verification lookups: %v, want the hanging one ended by serve.verify.timeout", pick(m, "freshq_serve_verify_lookups_total"))
	}
	for _, p := range []string{"/p/never", "/p/forged", "/p/hang"} {
		if got := origin.hitsOf(p); got != 0 {
			t.Fatalf("%s: the origin was asked %d times for an unverified crawler", p, got)
		}
	}
	m := n.metrics()
	for series, want := range map[string]float64{
		`freshq_serve_requests_total{code="200",family="google",result="miss",verification="verified"}`:   1,
		`freshq_serve_requests_total{code="200",family="google",result="hit",verification="pending"}`:     1,
		`freshq_serve_requests_total{code="503",family="google",result="miss",verification="unverified"}`: 3,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v; serve series: %v", series, m[series], want, pick(m, "freshq_serve_requests_total"))
		}
	}
	var q wire.QueueView
	if !n.getJSON("/v1/queue", &q) || q.Freshness == nil {
		t.Fatalf("/v1/queue: %+v", q)
	}
	got := map[string]wire.QueueCrawler{}
	for _, r := range q.Freshness.Crawlers {
		got[r.Family+"/"+r.Verification] = r
	}
	if v, u, p := got["google/verified"], got["google/unverified"], got["google/pending"]; v.Miss != 1 || v.Requests != 1 || u.Requests != 3 || u.Refused != 3 || p.Hit != 1 || p.Requests != 1 || p.StaleShare != 0 {
		t.Fatalf("/v1/queue freshness crawlers: %+v", q.Freshness.Crawlers)
	}
}

// 100,000 distinct addresses claiming Googlebot leave worker 0's verdict cache at its bound
// (serve.verify.cache_entries: 1,000), and worker 0's resident set grows by less than 32 MiB:
// an unbounded cache of 100,000 verdicts, or a lookup held per address, would not.
func TestEndToEndCrawlerVerificationCacheBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n, origin, _, serveAddr := crawlersNode(t)
	stored := "/" + origin.URL + "/p/stored"
	if a := crawl(t, serveAddr, stored, "X-Forwarded-For", e2eGoogleIP.String()); a.code != 200 {
		t.Fatalf("a first page: %d %q", a.code, a.body)
	}
	w0 := workerPID(n.segment(), 0)
	before := residentBytes(w0)
	const count = 100_000
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= count {
					return
				}
				req, _ := http.NewRequest(http.MethodGet, "http://"+serveAddr, nil)
				req.URL.Opaque = stored
				req.Header.Set("X-Prerender-Token", "crawl-token")
				req.Header.Set("User-Agent", crawlerUA)
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.%d.%d.%d", 18+i>>16, (i>>8)&0xff, i&0xff))
				code := -1
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	after := residentBytes(w0)
	m := n.metrics()
	t.Logf("worker 0: %d MiB before, %d MiB after %d claimed crawlers from distinct addresses (answers %v, verdicts cached %v)",
		before>>20, after>>20, count, codes, m["freshq_serve_verify_cache_entries"])
	if codes[200] != count {
		t.Fatalf("answers %v: want the stored page for every one", codes)
	}
	if workerPID(n.segment(), 0) != w0 {
		t.Fatal("worker 0 restarted under the requests")
	}
	if got := m["freshq_serve_verify_cache_entries"]; got != 1000 {
		t.Fatalf("verdicts cached: %v, want the bound 1000", got)
	}
	if grew := after - before; grew > 32<<20 {
		t.Fatalf("worker 0 grew by %d MiB verifying %d addresses, want under 32 MiB", grew>>20, count)
	}
}

// visitFrom is visit from the local address from (127.0.0.x: a client of its own to nginx),
// with extra headers as name, value pairs.
func visitFrom(t *testing.T, from, site, path, userAgent string, headers ...string) siteAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, site+path, nil)
	req.Header.Set("User-Agent", userAgent)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s from %s: %v", path, from, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return siteAnswer{resp.StatusCode, resp.Header, string(b)}
}

// Through the shipped nginx recipe, which forwards the crawler's address in X-Forwarded-For
// ($proxy_add_x_forwarded_for), to a crawler listener that trusts nginx (127.0.0.1) alone: a
// "Googlebot" connecting from an address Google's DNS (the test's) confirms, 127.0.0.3, is
// rendered on miss; one connecting from 127.0.0.2 that writes 127.0.0.3 into its own
// X-Forwarded-For is its own address to freshq (nginx appended it, to the right), not
// verified, and its page not stored costs no render.
func TestEndToEndNginxRecipeForwardsTheCrawlersAddress(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	google := netip.MustParseAddr("127.0.0.3")
	z := &testdns.Zone{
		Addrs: map[string][]netip.Addr{"crawl-127-0-0-3.googlebot.com": {google}},
		Names: map[netip.Addr][]string{google: {"crawl-127-0-0-3.googlebot.com."}},
	}
	t.Setenv(testDNSEnv, testdns.Listen(t, z))
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, "  client_ip_header: X-Forwarded-For\n  trusted_proxies: [127.0.0.1/32]\n"), "")
	site := nginxSite(t, serveAddr, "crawl-token")
	waitFor(t, "ready", 30*time.Second, n.ready)

	a := visitFrom(t, "127.0.0.2", site, "/c/forged", googlebot, "X-Forwarded-For", google.String())
	if a.code != 503 || !strings.Contains(a.body, "User-Agent") {
		t.Fatalf("a Googlebot from 127.0.0.2 that forged X-Forwarded-For, through nginx: %d %v %q", a.code, a.header, a.body)
	}
	a = visitFrom(t, google.String(), site, "/c/verified", googlebot)
	if a.code != 200 || a.header.Get("X-Freshq-Cache") != "miss" || !strings.Contains(a.body, "<title>shell</title>") {
		t.Fatalf("a Googlebot from a verified address, through nginx: %d %v %q", a.code, a.header, a.body)
	}
	if n.stored(t, site+"/c/forged") {
		t.Fatal("the unverified Googlebot's page was filed")
	}
	if got := n.metrics()[`freshq_render_total{outcome="ok"}`]; got != 1 {
		t.Fatalf("renders: %v, want the verified crawler's one", got)
	}
}

// Through the unmodified prerender-node middleware, which sends no client address, with what
// README shows added before it (X-Real-IP set from the connection, forwardHeaders): a
// "Googlebot" connecting from an address the test's DNS confirms as Google's is rendered on
// miss; one from 127.0.0.2 that writes the verified address into its own X-Real-IP is its own
// address to freshq (the app overwrote the header), not verified, and costs no render.
func TestEndToEndPrerenderNodeForwardsTheCrawlersAddress(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := npmInstall(t)
	google := netip.MustParseAddr("127.0.0.3")
	z := &testdns.Zone{
		Addrs: map[string][]netip.Addr{"crawl-127-0-0-3.googlebot.com": {google}},
		Names: map[netip.Addr][]string{google: {"crawl-127-0-0-3.googlebot.com."}},
	}
	t.Setenv(testDNSEnv, testdns.Listen(t, z))
	t.Setenv("FRESHQ_FORWARD_CLIENT", "1")
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, "  client_ip_header: X-Real-IP\n  trusted_proxies: [127.0.0.1/32]\n"), "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	site := expressSite(t, dir, serveAddr, "crawl-token")

	a := visitFrom(t, "127.0.0.2", site, "/p/forged", googlebot, "X-Real-IP", google.String())
	if a.code != 503 || !strings.Contains(a.body, "User-Agent") {
		t.Fatalf("a Googlebot from 127.0.0.2 that forged X-Real-IP, through prerender-node: %d %v %q", a.code, a.header, a.body)
	}
	if h := siteHits(t, site, "/p/forged"); h != 0 {
		t.Fatalf("the site served /p/forged %d times for an unverified crawler, want 0", h)
	}
	a = visitFrom(t, google.String(), site, "/p/verified", googlebot)
	if a.code != 200 || a.header.Get("X-Freshq-Cache") != "miss" || !strings.Contains(a.body, "site page /p/verified") {
		t.Fatalf("a Googlebot from a verified address, through prerender-node: %d %v %q", a.code, a.header, a.body)
	}
}
