package fuzz

import (
	"net/url"
	"strings"
	"testing"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
)

// FuzzCacheKeyNormalize normalises fuzz URLs under keys.drop_params' default and a route the
// fuzzer shapes (its match kind, pattern, trailing-slash policy and keep_params), followed by a
// catch-all route whose slash policy may contradict it. For every URL Normalize accepts:
//
//   - normalising the result again returns it unchanged (idempotent);
//   - the result parses as an absolute http(s) URL without fragment or credentials;
//   - its host is the submitted host lower-cased, and its port the submitted port unless that
//     was the scheme's default or empty, which is dropped.
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
		if want := strings.ToLower(in.Hostname()); u.Hostname() != want {
			t.Fatalf("%q → %q: host %q, want %q", raw, once, u.Hostname(), want)
		}
		port := in.Port()
		if def := map[string]string{"http": "80", "https": "443"}[u.Scheme]; port == def {
			port = ""
		}
		if u.Port() != port {
			t.Fatalf("%q → %q: port %q, want %q", raw, once, u.Port(), port)
		}
	})
}
