package policy

import (
	"bytes"

	"github.com/freshq/freshq/cachekey"
)

// route is a compiled Route.
type route struct {
	name       string
	match      matchKind
	pattern    []byte
	intervalMs int64 // 0 = the route sets no cadence or ceiling
	swrMs      int64
}

type matchKind uint8

const (
	matchExact matchKind = iota
	matchPrefix
	matchContains
)

func compileRoutes(rs []Route, defaultSWRMs int64) []route {
	out := make([]route, len(rs))
	for i, r := range rs {
		kind := matchExact
		switch r.Match {
		case MatchPrefix:
			kind = matchPrefix
		case MatchContains:
			kind = matchContains
		}
		swr := r.SWR.Milliseconds()
		if swr == 0 {
			swr = defaultSWRMs
		}
		out[i] = route{name: r.Name, match: kind, pattern: []byte(r.Path), intervalMs: r.Interval.Milliseconds(), swrMs: swr}
	}
	return out
}

// URLPath returns the path of the URL in a cache key (device + "|" + URL), without query or
// fragment: "desktop|https://a.test/c/x?p=1" → "/c/x". It allocates nothing. The sweep calls it
// for every due row, so each search is a single-byte IndexByte (vectorised) rather than
// IndexAny, which walks the bytes one by one.
func URLPath(cacheKey []byte) []byte {
	u := cacheKey
	if i := bytes.IndexByte(u, cachekey.SeparatorByte); i >= 0 {
		u = u[i+1:]
	}
	if i := bytes.Index(u, schemeSep); i >= 0 {
		u = u[i+len(schemeSep):]
		j := bytes.IndexByte(u, '/')
		if j < 0 {
			return rootPath
		}
		u = u[j:]
	}
	if i := bytes.IndexByte(u, '?'); i >= 0 {
		u = u[:i]
	}
	if i := bytes.IndexByte(u, '#'); i >= 0 {
		u = u[:i]
	}
	if len(u) == 0 {
		return rootPath
	}
	return u
}

var schemeSep, rootPath = []byte("://"), []byte("/")

// matchRoute returns the index of the first route matching the key's path, or -1.
func (p *Policy) matchRoute(cacheKey []byte) int {
	countRouteMatch()
	if len(p.routes) == 0 {
		return -1
	}
	path := URLPath(cacheKey)
	for i := range p.routes {
		r := &p.routes[i]
		var ok bool
		switch r.match {
		case matchExact:
			ok = bytes.Equal(path, r.pattern)
		case matchPrefix:
			ok = bytes.HasPrefix(path, r.pattern)
		case matchContains:
			ok = bytes.Contains(path, r.pattern)
		}
		if ok {
			return i
		}
	}
	return -1
}

// KeyRoute is a cache key's route as the policy resolved it (Resolve): what every decision
// of the key reads of its route, so that a service resolves a key once and hands the result
// to each of them rather than matching the key again in each.
type KeyRoute struct {
	Index      int    // the route's place in Options.Routes; -1 when the key matches none
	Name       string // routes[].name; "" for none
	IntervalMs int64  // routes[].interval: the cadence's ceiling; 0 = none
	SWRMs      int64  // the stale-while-revalidate window: the route's, else page.swr_ttl
}

// Resolve resolves key's route: the first route (in their order) whose match takes the key's
// path (URLPath). It is the one place the policy matches a key against its routes.
func (p *Policy) Resolve(cacheKey []byte) KeyRoute {
	if i := p.matchRoute(cacheKey); i >= 0 {
		r := &p.routes[i]
		return KeyRoute{Index: i, Name: r.name, IntervalMs: r.intervalMs, SWRMs: r.swrMs}
	}
	return KeyRoute{Index: -1, SWRMs: p.defaultSWRMs}
}

// RouteInterval is the route's interval for a cache key (routes[].interval): the longest
// time between two renders its configuration asks for, which a row's cadence never exceeds
// (Cadence clamps to it). 0 when the key matches no route or its route sets no interval.
func (p *Policy) RouteInterval(cacheKey []byte) int64 { return p.Resolve(cacheKey).IntervalMs }

// RouteOf names the route a cache key falls under ("" for none) and its stale-while-revalidate
// window in ms (page.swr_ttl when the key matches no route or the route sets none).
func (p *Policy) RouteOf(cacheKey []byte) (name string, swrMs int64) {
	kr := p.Resolve(cacheKey)
	return kr.Name, kr.SWRMs
}
