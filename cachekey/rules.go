package cachekey

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Trailing-slash policies of a RouteRule.
const (
	SlashKeep  = "keep"  // the path is left as submitted (the default)
	SlashAdd   = "add"   // a path that does not end in "/" gets one
	SlashStrip = "strip" // trailing "/"s are removed; "/" itself is never touched
)

// RouteRule is what a configured route (config.Route) says about the keys of its URLs. Match
// and Path select URLs exactly as the policy selects a cache key's route (policy.URLPath: the
// escaped path, without query; exact, prefix or contains), so that a URL's key rules and its
// cadence come from the same route; the first rule that matches wins.
type RouteRule struct {
	Match string // exact | prefix | contains
	Path  string
	// KeepParams, when not empty, is the allowlist of query parameter names (globs, as
	// DropParams) the route's keys keep: every other parameter is dropped.
	KeepParams []string
	// TrailingSlash is SlashKeep (or ""), SlashAdd or SlashStrip.
	TrailingSlash string
}

// Rules turn a submitted URL into the URL of its cache key, so that one page is one key however
// it was spelled. The zero Rules (and a nil *Rules) drop no parameter and have no route; they
// still lower-case the scheme, put the host in canonical form (canonicalHost: lower-case,
// punycode, no trailing dot, a port 1–65535 without leading zeros, no default port), drop the
// fragment, and sort the query. A Rules is immutable once built and safe for concurrent use.
//
// Normalize is idempotent: normalising its result again returns it unchanged (the fuzz target
// FuzzCacheKeyNormalize checks it), and two spellings of one host give one key
// (FuzzCacheKeyHostSpellings).
type Rules struct {
	drop   []string
	routes []RouteRule
}

// ErrRules is wrapped by every error of NewRules.
var ErrRules = errors.New("cachekey: bad key rules")

// NewRules builds Rules from the parameter-name globs every URL drops (keys.drop_params: "*"
// matches any run of characters, everything else itself, case-sensitively, as servers read
// parameter names) and the routes in their configured order.
func NewRules(dropParams []string, routes []RouteRule) (*Rules, error) {
	for _, g := range dropParams {
		if g == "" {
			return nil, fmt.Errorf("%w: empty parameter glob", ErrRules)
		}
	}
	for i, rt := range routes {
		switch rt.Match {
		case "exact", "prefix", "contains":
		default:
			return nil, fmt.Errorf("%w: route %d: match %q", ErrRules, i, rt.Match)
		}
		switch rt.TrailingSlash {
		case "", SlashKeep, SlashAdd, SlashStrip:
		default:
			return nil, fmt.Errorf("%w: route %d: trailing_slash %q", ErrRules, i, rt.TrailingSlash)
		}
		if slices.Contains(rt.KeepParams, "") {
			return nil, fmt.Errorf("%w: route %d: empty keep_params glob", ErrRules, i)
		}
	}
	return &Rules{drop: slices.Clone(dropParams), routes: slices.Clone(routes)}, nil
}

// ErrURL is wrapped by every error of Normalize and NormalizeURL.
var ErrURL = errors.New("must be an absolute http(s) URL without credentials")

// Normalize checks that raw is an absolute http(s) URL without credentials and returns the URL
// of its cache key: lower-case scheme, the host in canonical form (canonicalHost: lower-case,
// punycode, no trailing dot, IPv6 shortest; a port 1–65535 without leading zeros, none when it
// is the default, :80 for http, :443 for https, or empty; any other port is refused), no fragment, "/" for an empty path, the route's trailing-slash policy
// applied, the parameters matching a drop glob (or, on a route with keep_params, those not
// matching a keep glob) removed, and the rest sorted by name, stably (repeated names keep their
// order). A parameter's text is kept as submitted: it is never re-encoded.
func (r *Rules) Normalize(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("not a URL: %w", err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" || u.User != nil {
		return "", ErrURL
	}
	host, ok := canonicalHost(u.Scheme, u.Host)
	if !ok {
		return "", fmt.Errorf("%w: host %q is no host: a name (or IP address) and a port 1–65535", ErrURL, u.Host)
	}
	u.Host = host
	u.Fragment, u.RawFragment = "", ""
	if u.Path == "" {
		u.Path, u.RawPath = "/", ""
	}
	rt := r.slash(u)
	u.RawQuery, u.ForceQuery = r.settledQuery(u.RawQuery, rt), false
	return u.String(), nil
}

// settledQuery is the query of a key: filtered and sorted (query), without trailing white
// space. The URL ends there, and a second pass would trim it (TrimSpace in Normalize). A trim
// can leave what the next filtering changes again: an empty last pair (" & " → " &"), or a
// last name that now sorts earlier. So both are applied until the query no longer changes,
// which is what makes Normalize idempotent. Neither ever lengthens it, and a pass that leaves
// its length alone leaves it sorted, so this ends within len(raw)+2 passes.
func (r *Rules) settledQuery(raw string, rt *RouteRule) string {
	for {
		next := strings.TrimRightFunc(r.query(raw, rt), unicode.IsSpace)
		if next == raw {
			return next
		}
		raw = next
	}
}

// canonicalHost is the host of a key, so that one site spells it one way and nothing keyed by
// it (the key itself, the site's miss limit, its politeness) can be multiplied by respelling it:
//   - the name lower-cased, its trailing dots dropped, an internationalized name in its ASCII
//     (punycode) form under IDNA 2008's lookup rules, as the HTTP client dials it; an IPv6
//     literal in its shortest form ("[0:0::1]" is "[::1]");
//   - the port in decimal without leading zeros, 1–65535; the scheme's default port (80 for
//     http, 443 for https), or an empty one ("a.test:", the default by RFC 3986 §6.2.3),
//     dropped.
//
// ok is false for a port outside 1–65535, a name that is empty once its dots are dropped, an
// internationalized name IDNA refuses, and a host with a colon outside brackets other than its
// port's ("a:b:80"), which url.Parse lets through but which would not parse once its port is
// dropped. Its result is a fixed point: canonicalHost(scheme, result) returns result.
func canonicalHost(scheme, host string) (string, bool) {
	name, port := host, ""
	if strings.HasPrefix(host, "[") {
		i := strings.LastIndexByte(host, ']')
		if i < 0 {
			return "", false
		}
		name, port = host[:i+1], host[i+1:]
		if port != "" && port[0] != ':' {
			return "", false
		}
	} else {
		if strings.Count(host, ":") > 1 {
			return "", false
		}
		if i := strings.IndexByte(host, ':'); i >= 0 {
			name, port = host[:i], host[i:]
		}
	}
	name, ok := canonicalName(name)
	if !ok {
		return "", false
	}
	port, ok = canonicalPort(scheme, strings.TrimPrefix(port, ":"))
	if !ok {
		return "", false
	}
	if port == "" {
		return name, true
	}
	return name + ":" + port, true
}

// canonicalName is a host name (or bracketed IPv6 literal) in canonical form; see canonicalHost.
func canonicalName(name string) (string, bool) {
	if strings.HasPrefix(name, "[") {
		lit := strings.ToLower(name[1 : len(name)-1])
		zone := ""
		if i := strings.IndexByte(lit, '%'); i >= 0 {
			lit, zone = lit[:i], lit[i:]
		}
		if a, err := netip.ParseAddr(lit); err == nil && a.Is6() {
			lit = a.String()
		}
		return "[" + lit + zone + "]", true
	}
	name = strings.TrimRight(name, ".")
	if !isASCII(name) {
		ascii, err := idna.Lookup.ToASCII(name)
		if err != nil {
			return "", false
		}
		name = strings.TrimRight(ascii, ".")
	}
	name = strings.ToLower(name)
	return name, name != ""
}

// canonicalPort is port in decimal without leading zeros, "" for the scheme's default or an
// empty one; ok is false for anything but 1–65535 in ASCII digits.
func canonicalPort(scheme, port string) (string, bool) {
	if port == "" {
		return "", true
	}
	trimmed := strings.TrimLeft(port, "0")
	if trimmed == "" || len(trimmed) > 5 {
		return "", false
	}
	n := 0
	for i := 0; i < len(trimmed); i++ {
		c := trimmed[i]
		if c < '0' || c > '9' {
			return "", false
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 65535 {
		return "", false
	}
	if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
		return "", true
	}
	return trimmed, true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// slash applies the trailing-slash policy of the route of u's path and returns the route the
// resulting path falls under (nil: none), whose keep_params apply. A policy whose result falls
// under another route that would change it back (add on one route, strip on the next) is not
// applied: the path stays as submitted, so that Normalize stays idempotent whatever the routes.
func (r *Rules) slash(u *url.URL) *RouteRule {
	rt := r.route(u.EscapedPath())
	p, rp, ok := applySlash(rt, u.Path, u.RawPath)
	if !ok {
		return rt
	}
	esc := escaped(p, rp)
	rt2 := r.route(esc)
	if p2, rp2, ok2 := applySlash(rt2, p, rp); ok2 && escaped(p2, rp2) != esc {
		return rt // the two routes disagree: leave the path alone
	}
	u.Path, u.RawPath = p, rp
	return rt2
}

func escaped(p, rp string) string {
	u := url.URL{Path: p, RawPath: rp}
	return u.EscapedPath()
}

// applySlash returns path and rawPath under rt's trailing-slash policy, and whether it changed.
func applySlash(rt *RouteRule, path, rawPath string) (string, string, bool) {
	if rt == nil || path == "/" {
		return path, rawPath, false
	}
	switch rt.TrailingSlash {
	case SlashAdd:
		if strings.HasSuffix(path, "/") {
			return path, rawPath, false
		}
		if rawPath != "" {
			rawPath += "/"
		}
		return path + "/", rawPath, true
	case SlashStrip:
		p := strings.TrimRight(path, "/")
		if p == path || p == "" {
			return path, rawPath, false
		}
		return p, strings.TrimRight(rawPath, "/"), true
	}
	return path, rawPath, false
}

// route returns the first route whose pattern matches the escaped path, or nil.
func (r *Rules) route(path string) *RouteRule {
	if r == nil {
		return nil
	}
	for i := range r.routes {
		if MatchPath(r.routes[i].Match, r.routes[i].Path, path) {
			return &r.routes[i]
		}
	}
	return nil
}

// MatchPath reports whether a route of the given match kind (exact, prefix, contains) and
// pattern matches a URL path, the way policy matches routes.
func MatchPath(match, pattern, path string) bool {
	switch match {
	case "exact":
		return path == pattern
	case "prefix":
		return strings.HasPrefix(path, pattern)
	case "contains":
		return strings.Contains(path, pattern)
	}
	return false
}

// query filters and sorts a raw query. Empty pairs ("a=1&&b=2") are dropped; a pair's text is
// kept as submitted. Names are compared unescaped when they unescape, raw otherwise.
func (r *Rules) query(raw string, rt *RouteRule) string {
	if raw == "" {
		return ""
	}
	type pair struct{ name, text string }
	var pairs []pair
	for text := range strings.SplitSeq(raw, "&") {
		if text == "" {
			continue
		}
		name, _, _ := strings.Cut(text, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if r.dropped(name, rt) {
			continue
		}
		pairs = append(pairs, pair{name, text})
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return cmp.Compare(a.name, b.name) })
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.text)
	}
	return b.String()
}

func (r *Rules) dropped(name string, rt *RouteRule) bool {
	if rt != nil && len(rt.KeepParams) > 0 {
		return !slices.ContainsFunc(rt.KeepParams, func(g string) bool { return Glob(g, name) })
	}
	return r != nil && slices.ContainsFunc(r.drop, func(g string) bool { return Glob(g, name) })
}

// Glob reports whether name matches pattern, where "*" matches any run of characters (none
// included) and every other character only itself.
func Glob(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(name, p)
		if i < 0 {
			return false
		}
		name = name[i+len(p):]
	}
	return len(name) >= len(last) && strings.HasSuffix(name, last)
}
