package render

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/freshq/freshq/outcome"
)

func TestPublicAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"93.184.216.34":            true,
		"8.8.8.8":                  true,
		"2606:4700::1111":          true,
		"127.0.0.1":                false, // loopback
		"127.9.9.9":                false,
		"::1":                      false,
		"10.0.0.5":                 false, // RFC 1918
		"172.16.0.1":               false,
		"172.31.255.255":           false,
		"172.32.0.1":               true,
		"192.168.1.1":              false,
		"169.254.169.254":          false, // link-local: cloud metadata
		"fe80::1":                  false,
		"fe80::1%eth0":             false,
		"fc00::1":                  false, // ULA
		"fd00:ec2::254":            false, // AWS metadata over IPv6
		"100.64.0.1":               false, // CGNAT
		"100.100.100.200":          false, // Alibaba metadata, inside CGNAT
		"100.128.0.1":              true,
		"0.0.0.0":                  false, // unspecified
		"0.1.2.3":                  false, // "this network"
		"::":                       false,
		"224.0.0.1":                false, // multicast
		"ff02::1":                  false,
		"255.255.255.255":          false, // broadcast
		"240.0.0.1":                false, // reserved
		"198.18.0.1":               false, // benchmarking, often internal
		"192.0.0.8":                false,
		"::ffff:127.0.0.1":         false, // IPv4-mapped forms
		"::ffff:10.0.0.5":          false,
		"::ffff:169.254.169.254":   false,
		"::ffff:8.8.8.8":           true,
		"::127.0.0.1":              false, // IPv4-compatible (deprecated)
		"64:ff9b::a00:5":           false, // NAT64 of 10.0.0.5
		"64:ff9b::808:808":         true,  // NAT64 of 8.8.8.8
		"64:ff9b:1::1":             false, // local-use NAT64
		"2002:a00:5::1":            false, // 6to4 of 10.0.0.5
		"2002:808:808::1":          true,
		"fec0::1":                  false, // site-local (deprecated)
		"100::1":                   false, // discard-only
		"2001:db8::1":              true,  // documentation: not routed, not internal either
		"2a00:1450:4001:82b::200e": true,
	} {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		if got := publicAddr(a); got != want {
			t.Errorf("publicAddr(%s) = %v, want %v", addr, got, want)
		}
	}
	if publicAddr(netip.Addr{}) {
		t.Error("the zero Addr is public")
	}
}

func TestAddressPolicyPermits(t *testing.T) {
	list := []string{"127.0.0.1", "intranet.example", "example.com", "::1"}
	for _, tc := range []struct {
		domains []string
		host    string
		addr    string
		want    bool
	}{
		{nil, "example.com", "93.184.216.34", true}, // public: always
		{nil, "example.com", "10.0.0.5", false},     // an empty list allows no internal address
		{nil, "127.0.0.1", "127.0.0.1", false},
		{list, "127.0.0.1", "127.0.0.1", true},                // a listed address
		{list, "anything.test", "127.0.0.1", true},            // a listed address, whatever name led there
		{list, "localhost", "::1", true},                      // "::1" is listed
		{list, "localhost", "127.0.0.2", false},               // 127/8 is not: only the address listed
		{list, "intranet.example", "10.1.2.3", true},          // a listed name, exactly
		{list, "INTRANET.example.", "10.1.2.3", true},         // in canonical form
		{list, "www.intranet.example", "10.1.2.3", false},     // a subdomain of a listed name is not
		{list, "evil.example.com", "169.254.169.254", false},  // under a listed name: URL allowed, address not
		{list, "example.com", "169.254.169.254", true},        // the listed name itself
		{list, "example.com", "::ffff:169.254.169.254", true}, // mapped is the same address
		{list, "intranet.example", "93.184.216.34", true},     // public
		{[]string{"10.0.0.5"}, "x.test", "::ffff:10.0.0.5", true},
	} {
		g := newAddressGuard(tc.domains)
		if got := g.permits(tc.host, netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("domains %q: permits(%q, %s) = %v, want %v", tc.domains, tc.host, tc.addr, got, tc.want)
		}
	}
}

// The guard refuses at dial time, on the resolved address: a name that resolves to loopback is
// refused although the name itself passed every URL check, and the error names the policy only.
func TestAddressGuardRefusesAtDialTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dial := func(domains []string, addr string) error {
		c, err := newAddressGuard(domains).dialContext(&net.Dialer{})(ctx, "tcp", addr)
		if c != nil {
			c.Close()
		}
		return err
	}

	err := dial(nil, "localhost:"+port)
	if !errors.Is(err, ErrAddressPolicy) {
		t.Fatalf("localhost with an empty render.domains: %v, want the address policy", err)
	}
	if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), port) {
		t.Fatalf("the error names the network detail: %q", err)
	}
	// A closed port gives the same answer as an open one: no port-scan oracle.
	closed := freeLoopbackPort(t)
	if err2 := dial(nil, "127.0.0.1:"+closed); err2 == nil || err2.Error() != strings.Replace(err.Error(), "localhost", "127.0.0.1", 1) {
		t.Fatalf("open port: %q; closed port: %v", err, err2)
	}
	if err := dial([]string{"127.0.0.1"}, "127.0.0.1:"+port); err != nil {
		t.Fatalf("a listed address: %v", err)
	}
	if err := dial([]string{"localhost"}, "localhost:"+port); err != nil {
		t.Fatalf("a listed name: %v", err)
	}
}

func freeLoopbackPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

func TestEnvProxiesAreTrusted(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:3128")
	t.Setenv("HTTPS_PROXY", "proxy.internal")
	t.Setenv("NO_PROXY", "")
	got := proxyAddrs(httpproxy.FromEnvironment())
	for _, want := range []string{"127.0.0.1:3128", "proxy.internal:80"} {
		if !got[want] {
			t.Errorf("proxy %s is not trusted: %v", want, got)
		}
	}
	if len(got) != 2 {
		t.Errorf("trusted proxies %v", got)
	}
}

// setProxyEnv points the environment's HTTP proxy at proxy, for both spellings of each variable.
func setProxyEnv(t *testing.T, proxy string) {
	for _, k := range []string{"HTTP_PROXY", "http_proxy"} {
		t.Setenv(k, proxy)
	}
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
		t.Setenv(k, "")
	}
}

// A proxy from the environment is dialled whatever its address, but only as the proxy. Go
// sends a loopback or NO_PROXY URL directly, so a URL naming the proxy's own address would
// otherwise reach it with the proxy's exemption from the address policy: such a URL is refused
// like any internal address, by the sitemap transport and by the http renderer, while a request
// that does go through the proxy still works, and a proxy address listed in render.domains may
// be fetched.
func TestProxyAddressIsNoBypass(t *testing.T) {
	var direct, proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.IsAbs() { // a proxied request carries the absolute URL
			proxied.Add(1)
			io.WriteString(w, "through the proxy")
			return
		}
		direct.Add(1)
		io.WriteString(w, "the proxy itself")
	}))
	defer proxy.Close()
	setProxyEnv(t, proxy.URL)
	_, port, _ := net.SplitHostPort(proxy.Listener.Addr().String())

	get := func(domains []string, u string) (string, error) {
		resp, err := (&http.Client{Transport: NewTransport(domains)}).Get(u)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for _, u := range []string{proxy.URL + "/admin", "http://127.0.0.1:" + port, "https://127.0.0.1:" + port + "/"} {
		if body, err := get(nil, u); !errors.Is(err, ErrAddressPolicy) {
			t.Errorf("%s with an empty render.domains: %q, %v; want the address policy", u, body, err)
		}
	}
	rc := testConfig("http")
	rc.Timeout = 5 * time.Second
	h, err := NewHTTP(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if res := h.Render(ctx, Request{URL: proxy.URL + "/admin"}); res.Outcome != outcome.Blocked || res.Stage != StagePolicy {
		t.Errorf("the http renderer on the proxy's address: %v at %q (%s), want blocked at policy", res.Outcome, res.Stage, res.Err)
	}
	if n := direct.Load(); n != 0 {
		t.Fatalf("the proxy was reached directly %d times", n)
	}

	// Through the proxy (a public name, never resolved here): works.
	if body, err := get(nil, "http://shop.example/page"); err != nil || body != "through the proxy" {
		t.Fatalf("a proxied request: %q, %v", body, err)
	}
	if res := h.Render(ctx, Request{URL: "http://shop.example/page"}); res.Outcome != outcome.OK {
		t.Fatalf("the http renderer through the proxy: %v at %q (%s)", res.Outcome, res.Stage, res.Err)
	}
	// The proxy's address listed in render.domains: it may be fetched like any listed address.
	if body, err := get([]string{"127.0.0.1"}, proxy.URL+"/status"); err != nil || body != "the proxy itself" {
		t.Fatalf("a listed proxy address: %q, %v", body, err)
	}
}
