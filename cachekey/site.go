package cachekey

import (
	"bytes"
	"net/netip"
	"strings"
)

// Sites maps the host of a key to its site: the unit every per-site limit is kept by (the
// crawler listener's new targets on miss, serve.miss_rate; politeness, render.hosts.*), so that
// no spelling of a host, no port and no subdomain multiplies a limit.
//
// A host's site is the render.domains entry it equals or falls under (a subdomain, on any
// port), the longest such entry when several do ("shop.example.com" before "example.com": an
// entry the operator named is its own site). An IP address is its own site, on any port. A host
// no entry names (an empty list, or a host render.domains does not allow, which is never
// rendered) is its own site without its port. Entries are compared in the canonical form of a
// key's host (lower-case, punycode, no trailing dot), as render.Allowed compares them; an entry
// that has none is skipped.
//
// A Sites is immutable once built and safe for concurrent use; a nil *Sites names no entry.
type Sites struct {
	names []string
	bytes [][]byte // names as bytes, for SiteOfKey
}

// NewSites builds the sites of render.domains.
func NewSites(domains []string) *Sites {
	s := &Sites{}
	for _, d := range domains {
		d = strings.TrimSpace(d)
		if strings.HasPrefix(d, "[") || strings.Contains(d, ":") {
			continue // an IP literal (or nonsense): addresses are their own sites anyway
		}
		if _, err := netip.ParseAddr(d); err == nil {
			continue
		}
		if name, ok := canonicalName(d); ok && !strings.ContainsAny(name, "/@ ") {
			s.names = append(s.names, name)
			s.bytes = append(s.bytes, []byte(name))
		}
	}
	return s
}

// Of returns the site of host, a key's host as Host returns it (name[:port]).
func (s *Sites) Of(host []byte) string {
	name := hostName(string(host))
	if strings.HasPrefix(name, "[") {
		if a, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
			if a = a.Unmap(); a.Is4() {
				return a.String()
			}
			return "[" + a.String() + "]"
		}
		return name
	}
	if a, err := netip.ParseAddr(name); err == nil {
		return a.String()
	}
	if c, ok := canonicalName(name); ok {
		name = c // a key stored before hosts were canonical
	}
	best := ""
	if s != nil {
		for _, e := range s.names {
			if len(e) > len(best) && (name == e || (len(name) > len(e) && strings.HasSuffix(name, e) && name[len(name)-len(e)-1] == '.')) {
				best = e
			}
		}
	}
	if best != "" {
		return best
	}
	return name
}

// OfKey returns the site of a key's host (Of(Host(key))); a key without a host has the site "".
func (s *Sites) OfKey(key []byte) string {
	h := Host(key)
	if len(h) == 0 {
		return ""
	}
	return s.Of(h)
}

// SiteOfKey is OfKey as bytes, without allocating for a key whose host name is canonical
// ASCII (every key New builds from a normalised URL): politeness asks it for every row a sweep
// reads and every take. The result is read only: it is the key's own memory or the Sites'.
func (s *Sites) SiteOfKey(key []byte) []byte {
	host := Host(key)
	name := host
	if i := bytes.LastIndexByte(host, ':'); i >= 0 {
		name = host[:i]
	}
	if len(name) == 0 || !plainName(name) {
		if site := s.OfKey(key); site != "" {
			return []byte(site)
		}
		return nil
	}
	var best []byte
	if s != nil {
		for _, e := range s.bytes {
			if len(e) > len(best) && bytes.HasSuffix(name, e) && (len(name) == len(e) || name[len(name)-len(e)-1] == '.') {
				best = e
			}
		}
	}
	if best != nil {
		return best
	}
	return name
}

// plainName reports whether name is a host name in canonical form that is no IP address: ASCII
// lower-case letters, digits, '-', '_' and dots, not ending in a dot, with a letter or another
// character than a digit and a dot (an IPv4 address, or a number IP parsers may take for one,
// goes the slow way).
func plainName(name []byte) bool {
	letter := false
	for _, c := range name {
		switch {
		case 'a' <= c && c <= 'z', c == '-', c == '_':
			letter = true
		case '0' <= c && c <= '9', c == '.':
		default:
			return false
		}
	}
	return letter && name[len(name)-1] != '.'
}

// hostName is host without its port; an IPv6 literal keeps its brackets.
func hostName(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			return host[:i+1]
		}
		return host
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		return host[:i]
	}
	return host
}
