package api

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/freshq/freshq/testkit/testdns"
	"github.com/freshq/freshq/wire"
)

// Sitemap fetches dial under render's address policy: an internal address is reached only when
// render.domains lists it (the address, or the name being dialled exactly), on every hop, and a
// refusal names the policy, not the address or whether the port answered.
func TestSitemapFetchInternalAddressesOnlyWhenListed(t *testing.T) {
	var hits atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/hop.xml": // a redirect to a subdomain of the listed name, which resolves inside
			http.Redirect(w, r, "http://www.example.test:"+portOf(r.Host)+"/sitemap.xml", http.StatusFound)
		default:
			w.Header().Set("Content-Type", "application/xml")
			io.WriteString(w, `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://example.test/p</loc></url></urlset>`)
		}
	}))
	defer origin.Close()
	_, port, _ := net.SplitHostPort(origin.Listener.Addr().String())
	loopback := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	testdns.Use(t, map[string][]netip.Addr{"example.test": loopback, "www.example.test": loopback})

	refused := func(run wire.SitemapRun) {
		t.Helper()
		if run.Status != wire.RunFailed || !strings.Contains(run.Error, "refused by the address policy (render.domains)") ||
			strings.Contains(run.Error, "dial") || strings.Contains(run.Error, "connection") {
			t.Fatalf("run %+v, want a refusal that names the policy only", run)
		}
	}

	// Any host is allowed by name, but loopback is not listed: refused at dial time.
	_, srv := sitemapServerYAML(t, "render: {domains: []}\n")
	refused(waitRun(t, srv, postSitemapURL(t, srv, origin.URL+"/sitemap.xml")))
	// The same answer whether the port is open or not.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	refused(waitRun(t, srv, postSitemapURL(t, srv, closed.URL+"/sitemap.xml")))
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback origin was contacted %d times", n)
	}

	// The listed name itself may resolve inside; a redirect to a subdomain that does may not.
	e, srv := sitemapServerYAML(t, "render: {domains: [example.test]}\n")
	run := waitRun(t, srv, postSitemapURL(t, srv, "http://example.test:"+port+"/sitemap.xml"))
	if run.Status != wire.RunDone || run.Added.Count != 1 {
		t.Fatalf("a listed name: %+v", run)
	}
	if _, err := e.Store.GetSchedule([]byte("desktop|https://example.test/p")); err != nil {
		t.Fatal(err)
	}
	hits.Store(0)
	refused(waitRun(t, srv, postSitemapURL(t, srv, "http://example.test:"+port+"/hop.xml")))
	if n := hits.Load(); n != 1 {
		t.Fatalf("%d requests reached the origin, want only the first hop", n)
	}

	// The address listed: any name that leads to it.
	_, srv = sitemapServerYAML(t, "render: {domains: [example.test, 127.0.0.1]}\n")
	if run := waitRun(t, srv, postSitemapURL(t, srv, "http://example.test:"+port+"/hop.xml")); run.Status != wire.RunDone {
		t.Fatalf("a listed address: %+v", run)
	}
}

func portOf(hostport string) string {
	_, port, _ := net.SplitHostPort(hostport)
	return port
}
