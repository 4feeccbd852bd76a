package cachekey

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// defaultDrop is keys.drop_params' default (config.DropParamsDefault; this package imports
// nothing of freshq).
var defaultDrop = []string{"utm_*", "gclid", "fbclid", "msclkid", "mc_*", "_ga"}

func TestRulesNormalize(t *testing.T) {
	rules, err := NewRules(defaultDrop, []RouteRule{
		{Match: "prefix", Path: "/search", KeepParams: []string{"q", "page"}},
		{Match: "prefix", Path: "/blog/", TrailingSlash: SlashAdd},
		{Match: "prefix", Path: "/shop/", TrailingSlash: SlashStrip},
		{Match: "contains", Path: "/p/", KeepParams: []string{"v*"}},
		{Match: "exact", Path: "/flip", TrailingSlash: SlashAdd},    // → "/flip/" …
		{Match: "exact", Path: "/flip/", TrailingSlash: SlashStrip}, // … which would strip back
		{Match: "prefix", Path: "/", TrailingSlash: SlashKeep},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, raw, want string }{
		{"lower-case scheme and host", "HTTPS://A.Test/Case", "https://a.test/Case"},
		{"empty path is /", "https://a.test", "https://a.test/"},
		{"fragment dropped", "https://a.test/x#top", "https://a.test/x"},
		{"http default port dropped", "http://a.test:80/x", "http://a.test/x"},
		{"https default port dropped", "https://a.test:443/x", "https://a.test/x"},
		{"empty port dropped", "https://a.test:/x", "https://a.test/x"},
		{"other port kept", "https://a.test:80/x", "https://a.test:80/x"},
		{"http's port on https kept", "http://a.test:443/x", "http://a.test:443/x"},
		{"ipv6 default port", "http://[::1]:80/x", "http://[::1]/x"},
		{"utm glob dropped", "https://a.test/x?utm_source=n&utm_medium=e&id=3", "https://a.test/x?id=3"},
		{"every default dropped", "https://a.test/x?gclid=1&fbclid=2&msclkid=3&mc_cid=4&mc_eid=5&_ga=6&b=1", "https://a.test/x?b=1"},
		{"glob needs its prefix", "https://a.test/x?xutm_a=1&gclidx=2", "https://a.test/x?gclidx=2&xutm_a=1"},
		{"escaped name compared unescaped", "https://a.test/x?utm%5Fsource=1&a=1", "https://a.test/x?a=1"},
		{"sorted", "https://a.test/x?b=2&a=1&c=3", "https://a.test/x?a=1&b=2&c=3"},
		{"sort stable for repeated names", "https://a.test/x?b=2&a=z&b=1&a=y", "https://a.test/x?a=z&a=y&b=2&b=1"},
		{"value text kept as submitted", "https://a.test/x?q=a%20b+c&p", "https://a.test/x?p&q=a%20b+c"},
		{"empty pairs and ? dropped", "https://a.test/x?&&", "https://a.test/x"},
		{"white space trimmed until no empty pair is left", "https://a.test/x? & #f", "https://a.test/x"},
		{"white space trimmed off the pair sorted last", "https://a.test/x?c &a#f", "https://a.test/x?a&c"},
		{"all dropped leaves no ?", "https://a.test/x?utm_a=1", "https://a.test/x"},
		{"keep_params allowlist", "https://a.test/search?sort=d&q=x&utm_a=1&page=2", "https://a.test/search?page=2&q=x"},
		{"keep_params glob", "https://a.test/c/p/9?v=1&variant=2&ref=x", "https://a.test/c/p/9?v=1&variant=2"},
		{"keep_params beats drop_params", "https://a.test/search?q=1&gclid=2", "https://a.test/search?q=1"},
		{"trailing slash add", "https://a.test/blog/post", "https://a.test/blog/post/"},
		{"trailing slash add keeps query", "https://a.test/blog/post?a=1", "https://a.test/blog/post/?a=1"},
		{"trailing slash strip", "https://a.test/shop/item//", "https://a.test/shop/item"},
		{"strip moves the path off its route", "https://a.test/shop/", "https://a.test/shop"},
		{"trailing slash keep", "https://a.test/about/", "https://a.test/about/"},
		{"never on / itself", "https://a.test/", "https://a.test/"},
		{"routes that disagree leave the path", "https://a.test/flip", "https://a.test/flip"},
		{"escaped path kept", "https://a.test/blog/a%2Fb", "https://a.test/blog/a%2Fb/"},
	} {
		got, err := rules.Normalize(c.raw)
		if err != nil || got != c.want {
			t.Errorf("%s: Normalize(%q) = %q, %v; want %q", c.name, c.raw, got, err, c.want)
			continue
		}
		if again, err := rules.Normalize(got); err != nil || again != got {
			t.Errorf("%s: not idempotent: %q → %q, %v", c.name, got, again, err)
		}
	}
}

// TestRulesSortStableLong sorts more pairs than a sort's insertion-sort cut-off (12), where an
// unstable sort would reorder the values of a repeated name.
func TestRulesSortStableLong(t *testing.T) {
	raw, want := "https://a.test/x?", "https://a.test/x?"
	for i := range 30 {
		if i > 0 {
			raw += "&"
		}
		raw += fmt.Sprintf("%c=%d", 'b'-rune(i%2), i)
	}
	for i := 1; i < 30; i += 2 {
		want += fmt.Sprintf("a=%d&", i)
	}
	for i := 0; i < 30; i += 2 {
		want += fmt.Sprintf("b=%d&", i)
	}
	want = strings.TrimSuffix(want, "&")
	if got, err := (&Rules{}).Normalize(raw); err != nil || got != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
}

func TestRulesNormalizeRefuses(t *testing.T) {
	r, _ := NewRules(defaultDrop, nil)
	for _, bad := range []string{"", "a.test/x", "ftp://a.test/", "https://u:p@a.test/", "mailto:x@a.test", "https:///x", "http://a:b:80/", "http://%zz/", "http://:", "http://:80/x"} {
		if got, err := r.Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) = %q, accepted", bad, got)
		}
	}
}

func TestNilRulesDropNothing(t *testing.T) {
	var r *Rules
	got, err := r.Normalize("https://A.test:443/x?utm_source=n&b=1&a=2#f")
	if want := "https://a.test/x?a=2&b=1&utm_source=n"; err != nil || got != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

func TestNewRulesRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		drop   []string
		routes []RouteRule
	}{
		"empty drop glob":  {drop: []string{""}},
		"bad match":        {routes: []RouteRule{{Match: "regex", Path: "/"}}},
		"bad slash policy": {routes: []RouteRule{{Match: "prefix", Path: "/", TrailingSlash: "both"}}},
		"empty keep glob":  {routes: []RouteRule{{Match: "prefix", Path: "/", KeepParams: []string{""}}}},
	} {
		if _, err := NewRules(c.drop, c.routes); !errors.Is(err, ErrRules) {
			t.Errorf("%s: err = %v, want ErrRules", name, err)
		}
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"utm_*", "utm_source", true}, {"utm_*", "utm_", true}, {"utm_*", "utm", false},
		{"gclid", "gclid", true}, {"gclid", "GCLID", false}, {"*", "", true},
		{"a*b*c", "abc", true}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "acb", false},
		{"*_id", "user_id", true}, {"a*a", "a", false}, {"a*a", "aa", true},
	} {
		if got := Glob(c.pattern, c.name); got != c.want {
			t.Errorf("Glob(%q, %q) = %v", c.pattern, c.name, got)
		}
	}
}
