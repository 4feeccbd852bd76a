package render

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http/httpproxy"
	"golang.org/x/net/idna"
)

// ErrAddressPolicy is the refusal of a dial to an internal address that render.domains does not
// list. Its text names the policy and nothing of the network: whether the port was open, or
// which address the name resolved to, is not said, so a fetch's error is no port-scan oracle.
var ErrAddressPolicy = errors.New("refused by the address policy (render.domains)")

// The address policy: what the http renderer and sitemap fetches may dial.
//
// A fetch may dial a public address. An internal one — loopback, private (RFC 1918, ULA
// fc00::/7), link-local (169.254/16 with the cloud metadata address, fe80::/10), CGNAT
// (100.64/10), unspecified, "this network" (0/8), multicast, broadcast and reserved, and the
// IPv4-mapped, IPv4-compatible, NAT64 and 6to4 forms of an internal IPv4 address — only when
// render.domains lists it explicitly:
//   - the address itself is an entry ("127.0.0.1", "::1", "10.0.0.5"), whatever name led to it;
//   - or the host name being dialled is an entry, exactly: listing "intranet.example" lets it
//     resolve to 10.1.2.3, but does not let "www.intranet.example", nor any other name under a
//     listed domain, reach an internal address. Subdomains stay allowed for public addresses.
//
// An empty render.domains (any host) allows no internal address at all.
//
// The check runs at dial time, in the dialer's Control hook, on the address actually being
// connected to after DNS resolution: a name that resolved to a public address when the URL was
// checked and to 127.0.0.1 when dialled (DNS rebinding) is refused, and so is every redirect
// hop, since each hop dials.
//
// A proxy from the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, read once when the guard is
// made) is the operator's choice and is dialled whatever its address; the proxy then resolves
// names itself, so it must apply its own egress policy. Through a proxy the guard still refuses
// a URL whose host is an internal IP literal. The exemption is for dialling the proxy as the
// proxy only: Go sends a loopback or NO_PROXY URL directly, so a URL that names a proxy's own
// host:port (http://127.0.0.1:3128/ with HTTP_PROXY=http://127.0.0.1:3128) would reach it
// unchecked; such a URL is refused unless render.domains lists its host.
type addressGuard struct {
	allow    *allowlist
	proxyFor func(*url.URL) (*url.URL, error) // the environment's proxy for a URL; nil = direct
	proxies  map[string]bool                  // host:port of the environment's proxies, as the transport dials them
}

func newAddressGuard(domains []string) *addressGuard {
	env := httpproxy.FromEnvironment()
	return &addressGuard{allow: newAllowlist(domains), proxyFor: env.ProxyFunc(), proxies: proxyAddrs(env)}
}

// permits reports whether a dial of host (the name or literal of the URL) may connect to addr.
func (g *addressGuard) permits(host string, addr netip.Addr) bool {
	if publicAddr(addr) {
		return true
	}
	return slices.Contains(g.allow.addrs, addr.WithZone("").Unmap()) || g.listedName(host)
}

// dialContext returns base's DialContext with the policy checked on every address it connects to.
func (g *addressGuard) dialContext(base *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if g.proxies[addr] {
			return base.DialContext(ctx, network, addr)
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		d := *base
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !g.permits(host, ap.Addr()) {
				return ErrAddressPolicy
			}
			return nil
		}
		c, err := d.DialContext(ctx, network, addr)
		if errors.Is(err, ErrAddressPolicy) {
			return nil, &addressError{host: host}
		}
		return c, err
	}
}

// proxy is the transport's Proxy: the environment's proxy for the request, as
// http.ProxyFromEnvironment decides it. It refuses a proxied URL whose host is an internal IP
// literal that render.domains does not list (the proxy would dial it for us), and a URL sent
// directly that names a proxy's own address (its dial would pass as the proxy's) unless
// render.domains lists that host.
func (g *addressGuard) proxy(req *http.Request) (*url.URL, error) {
	p, err := g.proxyFor(req.URL)
	if err != nil {
		return nil, err
	}
	host := req.URL.Hostname()
	if p == nil {
		if g.namesProxy(req.URL) && !g.listed(host) {
			return nil, &addressError{host: host}
		}
		return nil, nil
	}
	if a, err := netip.ParseAddr(host); err == nil && !g.permits(host, a) {
		return nil, &addressError{host: host}
	}
	return p, nil
}

// namesProxy reports whether a direct dial for u would go to one of the environment's proxies:
// u's host (as written, and in its IDNA form) and port (or the scheme's) are a proxy's. It
// errs on the side of a match (case is ignored), which only refuses more.
func (g *addressGuard) namesProxy(u *url.URL) bool {
	if len(g.proxies) == 0 {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	hosts := []string{u.Hostname()}
	if a, err := idna.Lookup.ToASCII(u.Hostname()); err == nil {
		hosts = append(hosts, a)
	}
	for p := range g.proxies {
		ph, pp, err := net.SplitHostPort(p)
		if err != nil || pp != port {
			continue
		}
		for _, h := range hosts {
			if strings.EqualFold(h, ph) {
				return true
			}
		}
	}
	return false
}

// listed reports whether render.domains lists host (a URL's) exactly: its address, or its name.
func (g *addressGuard) listed(host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		return slices.Contains(g.allow.addrs, a.WithZone("").Unmap())
	}
	return g.listedName(host)
}

// listedName reports whether render.domains lists the name host, exactly (no subdomain).
func (g *addressGuard) listedName(host string) bool {
	name, _, ok := canonicalHost(stripPort(host))
	return ok && name != "" && slices.Contains(g.allow.names, name)
}

// addressError is a refused dial: the host asked for, never the address it resolved to.
type addressError struct{ host string }

func (e *addressError) Error() string { return "host " + e.host + ": " + ErrAddressPolicy.Error() }
func (e *addressError) Unwrap() error { return ErrAddressPolicy }

// NewTransport returns an HTTP transport for fetching from the open web under the address
// policy of domains (render.domains): http.DefaultTransport's settings, every dial checked.
// Sitemap fetches use it; the http renderer builds its own with the same guard.
func NewTransport(domains []string) *http.Transport {
	g := newAddressGuard(domains)
	t := &http.Transport{ForceAttemptHTTP2: true, MaxIdleConns: 100, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ExpectContinueTimeout: time.Second}
	if d, ok := http.DefaultTransport.(*http.Transport); ok {
		t = d.Clone()
	}
	t.DialContext = g.dialContext(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})
	t.Proxy = g.proxy
	return t
}

// proxyAddrs returns the host:port of the HTTP and HTTPS proxies cfg configures, as the
// transport dials them.
func proxyAddrs(cfg *httpproxy.Config) map[string]bool {
	out := map[string]bool{}
	for _, p := range []string{cfg.HTTPProxy, cfg.HTTPSProxy} {
		if p == "" {
			continue
		}
		u, err := url.Parse(p)
		if err != nil || u.Host == "" {
			if u, err = url.Parse("http://" + p); err != nil {
				continue
			}
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "socks5": "1080", "socks5h": "1080"}[u.Scheme]
			if port == "" {
				port = "80"
			}
		}
		out[net.JoinHostPort(u.Hostname(), port)] = true
	}
	return out
}

// Internal address ranges; see addressGuard.
var (
	internal4 = prefixes("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4")
	internal6 = prefixes("::/96", "64:ff9b:1::/48", "100::/64", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// publicAddr reports whether a is outside every internal range, an IPv6 address that embeds an
// IPv4 one (mapped, NAT64, 6to4) judged by the IPv4 address it reaches.
func publicAddr(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return !slices.ContainsFunc(internal4, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	if slices.ContainsFunc(internal6, func(p netip.Prefix) bool { return p.Contains(a) }) {
		return false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return publicAddr(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		return publicAddr(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return true
}
