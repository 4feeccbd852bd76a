package crawlers

import (
	"net"
	"net/netip"
	"strings"
)

// maxHops bounds how many entries of a client-address header are read: a chain of proxies is a
// handful long, and a client may send a header of thousands.
const maxHops = 32

// LoopbackProxies is serve.trusted_proxies' default: the loopback addresses, where a site's
// middleware or nginx on the same machine connects from.
func LoopbackProxies() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
}

// ClientIP is the address of the client a request is for. peer is the connection's remote
// address (host:port); values are the header's values (every line of it) as the request
// carried them, empty when no header is configured. When the peer is one of trusted, the
// header's addresses are read right to left (a comma-separated list across its lines, as
// X-Forwarded-For appends one per hop; a header of one address, CF-Connecting-IP or X-Real-IP,
// is a list of one), and the first that is not itself a trusted proxy is the client: the
// left-most entries are what the client sent, which its proxy appended to. An entry that does
// not parse ends the walk at the last trusted address read (the peer when none), since what
// lies left of garbage is no proxy's word. fromHeader reports whether the header gave it.
// It never panics, whatever the input (fuzzed).
func ClientIP(peer string, values []string, trusted []netip.Prefix) (addr netip.Addr, fromHeader bool) {
	p := parseHost(peer)
	if !p.IsValid() || len(values) == 0 || !contains(trusted, p) {
		return p, false
	}
	last, got, hops := p, false, 0
	for i := len(values) - 1; i >= 0; i-- {
		rest := values[i]
		for rest != "" {
			var entry string
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				entry, rest = rest[j+1:], rest[:j]
			} else {
				entry, rest = rest, ""
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			if hops++; hops > maxHops {
				return last, got
			}
			a := parseHost(entry)
			if !a.IsValid() {
				return last, got
			}
			if !contains(trusted, a) {
				return a, true
			}
			last, got = a, true
		}
	}
	return last, got
}

// parseHost is the address of "addr", "addr:port" or "[v6]:port", unmapped, without a zone;
// the zero Addr when it is none.
func parseHost(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap().WithZone("")
	}
	if h, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(h); err == nil {
			return a.Unmap().WithZone("")
		}
	}
	return netip.Addr{}
}

func contains(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
