package fuzz

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
)

// FuzzCacheKeyNormalize normalises fuzz URLs under keys.drop_params' default and a route the
// fuzzer shapes (its match kind, pattern, trailing-slash policy and keep_params), followed by a
// catch-all route whose slash policy may contradict it. For every URL Normalize accepts:
//
//   - normalising the result again returns it unchanged (idempotent);
//   - the result parses as an absolute http(s) URL without fragment or credentials;
//   - its host is the submitted host in canonical form (canonicalHostname: lower-case, no
//     trailing dot, IDNA ASCII, IPv6 shortest), and its port the submitted port without leading
//     zeros, 1–65535, unless that was the scheme's default or empty, which is dropped.
func FuzzCacheKeyNormalize(f *testing.F) {
	for _, s := range []string{
		"HTTPS://A.Test:443/Blog/post?utm_source=x&b=2&a=1#frag",
		"http://a.test:80", "http://a.test:/x/?", "https://a.test/x//?&&q=a%20b&q=c",
		"http://[::1]:80/p/", "https://a.test/a%2Fb/?utm%5Fx=1", "http://a:b:80/", "https://é.test/x",
	} {
		f.Add(s, "/blog", byte(0))
		f.Add(s, "/", byte(0x1b))
		f.Add(s, "/x/", byte(0x25))
	}
	f.Fuzz(func(t *testing.T, raw, pattern string, mode byte) {
		slashes := []string{cachekey.SlashKeep, cachekey.SlashAdd, cachekey.SlashStrip}
		first := cachekey.RouteRule{
			Match:         []string{"exact", "prefix", "contains"}[mode%3],
			Path:          pattern,
			TrailingSlash: slashes[mode/3%3],
		}
		if mode&0x10 != 0 {
			first.KeepParams = []string{"a*", "q"}
		}
		catchAll := cachekey.RouteRule{Match: "prefix", Path: "/", TrailingSlash: slashes[mode/32%3]}
		rules, err := cachekey.NewRules(config.DropParamsDefault(), []cachekey.RouteRule{first, catchAll})
		if err != nil {
			t.Fatal(err)
		}
		once, err := rules.Normalize(raw)
		if err != nil {
			return
		}
		twice, err := rules.Normalize(once)
		if err != nil || twice != once {
			t.Fatalf("not idempotent: %q → %q → %q, %v", raw, once, twice, err)
		}
		u, err := url.Parse(once)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
			t.Fatalf("%q → %q does not parse as a key URL: %v", raw, once, err)
		}
		in, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			t.Fatalf("Normalize accepted %q, which does not parse: %v", raw, err)
		}
		want, ok := canonicalHostname(in.Hostname())
		if !ok {
			t.Fatalf("Normalize accepted %q, whose host %q has no canonical form", raw, in.Hostname())
		}
		if u.Hostname() != want {
			t.Fatalf("%q → %q: host %q, want %q", raw, once, u.Hostname(), want)
		}
		port := strings.TrimLeft(in.Port(), "0")
		if n, err := strconv.Atoi(port); in.Port() != "" && (err != nil || n < 1 || n > 65535) {
			t.Fatalf("%q → %q: accepted the port %q", raw, once, in.Port())
		}
		if def := map[string]string{"http": "80", "https": "443"}[u.Scheme]; port == def {
			port = ""
		}
		if u.Port() != port {
			t.Fatalf("%q → %q: port %q, want %q", raw, once, u.Port(), port)
		}
	})
}

// canonicalHostname is what a key's host name must be for a URL's (url.URL.Hostname: no
// brackets, no port), worked out apart from cachekey: an IP address in its shortest form (an
// IPv6 zone kept, lower-cased); a name without its trailing dots, in its IDNA lookup ASCII form
// if it is not ASCII, lower-cased. ok is false for a name that is empty or that IDNA refuses.
func canonicalHostname(h string) (string, bool) {
	if strings.Contains(h, ":") {
		lit, zone, _ := strings.Cut(strings.ToLower(h), "%")
		if zone != "" {
			zone = "%" + zone
		}
		if a, err := netip.ParseAddr(lit); err == nil && a.Is6() {
			lit = a.String()
		}
		return lit + zone, true
	}
	h = strings.TrimRight(h, ".")
	for _, r := range h {
		if r >= utf8.RuneSelf {
			a, err := idna.Lookup.ToASCII(h)
			if err != nil {
				return "", false
			}
			h = strings.TrimRight(a, ".")
			break
		}
	}
	h = strings.ToLower(h)
	return h, h != ""
}

// FuzzCacheKeyHostSpellings spells one URL two ways, as a crawler listener's caller may: the
// host with its ASCII letters in upper case, with trailing dots, in its IDNA ASCII form; the
// port with leading zeros, the scheme's default port written out or left empty; an IPv6
// literal in full or shortest form. Both spellings give one key (or are both refused), and
// Normalize is idempotent and never panics. One key is one site: nothing keyed by a key's host
// (the site's miss limit, its politeness) can be multiplied by respelling it.
func FuzzCacheKeyHostSpellings(f *testing.F) {
	f.Add("localhost", uint32(18611), "/same-page", uint16(0x0305))
	f.Add("Shop.Example", uint32(0), "/", uint16(0x00ff))
	f.Add("bücher.example", uint32(8080), "/a?b=1", uint16(0x0a31))
	f.Add("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01", uint32(80), "/", uint16(0x0101))
	f.Add("a.test", uint32(99999), "/x", uint16(0x0204))
	f.Add("a.test", uint32(65535), "/x", uint16(0x0f04))
	f.Fuzz(func(t *testing.T, host string, port uint32, path string, how uint16) {
		scheme := []string{"http", "https"}[how>>15&1]
		defPort := map[string]uint32{"http": 80, "https": 443}[scheme]
		if len(host) > 253 || len(path) > 512 {
			return
		}
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "#% \t\r\n") {
			path = "/p"
		}
		plain, spelled := host, host
		if how&1 != 0 { // an IPv6 literal, from the host's first 16 bytes
			var b [16]byte
			copy(b[:], host)
			a := netip.AddrFrom16(b)
			plain, spelled = "["+a.String()+"]", "["+a.StringExpanded()+"]"
			if how&2 != 0 {
				spelled = strings.ToUpper(spelled)
			}
		} else {
			// Not a host name at all (invalid UTF-8 is no name IDNA could spell another way):
			// FuzzCacheKeyNormalize feeds Normalize such bytes.
			if host == "" || !utf8.ValidString(host) || strings.ContainsAny(host, "/?#@[]:%\\") || strings.IndexFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
				return
			}
			if how&2 != 0 {
				spelled = asciiUpper(spelled)
			}
			if how&4 != 0 {
				spelled += strings.Repeat(".", 1+int(how>>12&3))
			}
			if how&8 != 0 {
				if a, err := idna.Lookup.ToASCII(host); err == nil {
					spelled = a
					if how&2 != 0 {
						spelled = asciiUpper(spelled)
					}
				}
			}
		}
		zeros := strings.Repeat("0", int(how>>4&0xf))
		plainURL, spelledURL := scheme+"://"+plain, scheme+"://"+spelled
		switch {
		case port != 0:
			p := strconv.FormatUint(uint64(port%200000), 10)
			plainURL += ":" + p
			spelledURL += ":" + zeros + p
		case how&0x100 != 0: // the default port written out
			spelledURL += ":" + zeros + strconv.FormatUint(uint64(defPort), 10)
		case how&0x200 != 0: // an empty port
			spelledURL += ":"
		}
		plainURL += path
		spelledURL += path

		a, errA := cachekey.NormalizeURL(plainURL)
		b, errB := cachekey.NormalizeURL(spelledURL)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("one URL, two spellings, one refused: %q → %q, %v; %q → %q, %v", plainURL, a, errA, spelledURL, b, errB)
		}
		if errA != nil {
			return
		}
		if a != b {
			t.Fatalf("one URL, two keys: %q → %q; %q → %q", plainURL, a, spelledURL, b)
		}
		if again, err := cachekey.NormalizeURL(a); err != nil || again != a {
			t.Fatalf("not idempotent: %q → %q → %q, %v", plainURL, a, again, err)
		}
		if p := port % 200000; port != 0 && (p < 1 || p > 65535) {
			t.Fatalf("%q accepted a port outside 1–65535: %q", plainURL, a)
		}
		sites := cachekey.NewSites([]string{host})
		ka, kb := cachekey.New("desktop", a), cachekey.New("mobile", b)
		if sa, sb := sites.OfKey(ka), sites.OfKey(kb); sa != sb || sa == "" {
			t.Fatalf("one URL, two sites: %q, %q", sa, sb)
		}
		if fast := string(sites.SiteOfKey(ka)); fast != sites.OfKey(ka) {
			t.Fatalf("%q: SiteOfKey %q, OfKey %q", a, fast, sites.OfKey(ka))
		}
	})
}

// asciiUpper upper-cases ASCII letters only: a non-ASCII letter's upper case may lower-case to
// another letter (U+0131 → I → i), another host.
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
