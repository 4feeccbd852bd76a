package render

import (
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Allowed reports whether host may be fetched under the allowlist domains (render.domains): host
// equals an entry, or is a subdomain of one ("www.example.com" and "a.b.example.com" under
// "example.com"; "badexample.com" is not). An empty list allows every host.
//
// Both sides are compared in canonical form:
//   - case-folded, with one trailing dot dropped ("Example.COM." is "example.com");
//   - internationalized names in their ASCII form (IDNA 2008 lookup rules, as the HTTP client
//     dials them), so "bücher.example" and "xn--bcher-kva.example" are the same entry;
//   - a port is ignored: host may be "example.com:8443" or "[::1]:80", and the list is of hosts,
//     not ports;
//   - an IP address matches only the same address (in any spelling: "::1" is "0:0:0:0:0:0:0:1"),
//     never as a suffix.
//
// It fails closed: a host that cannot be put in canonical form is refused, an entry that cannot
// is skipped, so a non-empty list of only unusable entries allows nothing.
//
// Allowed judges names only. Which addresses a fetch may then connect to is the address policy,
// applied at dial time by the http renderer and NewTransport: an internal address needs an IP
// entry equal to it, or an entry equal to the very name being dialled — a subdomain match, and
// an empty list, allow public addresses only.
func Allowed(domains []string, host string) bool {
	return newAllowlist(domains).allows(host)
}

// allowlist is render.domains in canonical form, built once per renderer.
type allowlist struct {
	any   bool     // the configured list was empty: every host is allowed
	names []string // canonical host names
	addrs []netip.Addr
}

func newAllowlist(domains []string) *allowlist {
	a := &allowlist{any: len(domains) == 0}
	for _, d := range domains {
		name, addr, ok := canonicalHost(strings.TrimSpace(d))
		switch {
		case !ok:
		case addr.IsValid():
			a.addrs = append(a.addrs, addr)
		default:
			a.names = append(a.names, name)
		}
	}
	return a
}

func (a *allowlist) allows(host string) bool {
	if a.any {
		return true
	}
	name, addr, ok := canonicalHost(stripPort(host))
	if !ok {
		return false
	}
	if addr.IsValid() {
		for _, x := range a.addrs {
			if x == addr {
				return true
			}
		}
		return false
	}
	for _, e := range a.names {
		if name == e || (len(name) > len(e) && strings.HasSuffix(name, e) && name[len(name)-len(e)-1] == '.') {
			return true
		}
	}
	return false
}

// stripPort drops a ":port" suffix and IPv6 brackets; a bare IPv6 address is returned whole.
func stripPort(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			return host[1:i]
		}
		return host
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.IndexByte(host, ':') == i {
		return host[:i]
	}
	return host
}

// canonicalHost returns a host's canonical name, or its address when it is an IP literal.
func canonicalHost(h string) (name string, addr netip.Addr, ok bool) {
	if h == "" {
		return "", netip.Addr{}, false
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		return "", a.Unmap().WithZone(""), true
	}
	h = strings.TrimSuffix(h, ".")
	if !isASCII(h) {
		ascii, err := idna.Lookup.ToASCII(h)
		if err != nil {
			return "", netip.Addr{}, false
		}
		h = ascii
	}
	h = strings.ToLower(h)
	if h == "" || strings.HasPrefix(h, ".") || strings.Contains(h, "..") || strings.ContainsAny(h, "/:@ ") {
		return "", netip.Addr{}, false
	}
	return h, netip.Addr{}, true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
