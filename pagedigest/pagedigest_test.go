package pagedigest

import (
	"strings"
	"testing"
)

func mustNew(t testing.TB, defaults bool, strip ...string) *Normalizer {
	t.Helper()
	n, err := New(defaults, strip)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Two loads of one page that differ only in what changes on every load digest alike; a change
// of content does not.
func TestDefaultsStripWhatChangesOnEveryLoad(t *testing.T) {
	page := func(token, nonce, at, bust, hash, price string) string {
		return `<html><head><meta name="csrf-token" content="` + token + `">` +
			`<script nonce="` + nonce + `" src="/static/app.` + hash + `.js"></script>` +
			`<link rel="stylesheet" href="/site.css?v=` + bust + `"></head><body>` +
			`<form><input type="hidden" name="authenticity_token" value="` + token + `"></form>` +
			`<p>Price: ` + price + `</p><footer>generated ` + at + `</footer></body></html>`
	}
	n := mustNew(t, true)
	a := n.Digest([]byte(page("tok1", "n0nce1", "2026-12-02T09:00:01.123Z", "1701", "3f2a1b9c", "10 €")))
	b := n.Digest([]byte(page("tok2", "n0nce2", "2026-12-02T10:17:45+01:00", "1702", "aa77bb88", "10 €")))
	if a != b {
		t.Fatalf("loads differing only in tokens, nonces, times and cache-busters digest %x and %x", a, b)
	}
	c := n.Digest([]byte(page("tok1", "n0nce1", "2026-12-02T09:00:01.123Z", "1701", "3f2a1b9c", "12 €")))
	if c == a {
		t.Fatal("a changed price digests as the same content")
	}
	raw := mustNew(t, false)
	if raw.Digest([]byte(page("tok1", "x", "y", "1", "3f2a1b9c", "1"))) == raw.Digest([]byte(page("tok2", "x", "y", "1", "3f2a1b9c", "1"))) {
		t.Fatal("without the defaults a token change is a change")
	}
}

// A route's own patterns are removed too, after the defaults.
func TestRoutePatterns(t *testing.T) {
	n := mustNew(t, true, `<div class="views">[0-9]+ views</div>`)
	a := n.Digest([]byte(`<p>x</p><div class="views">10 views</div>`))
	b := n.Digest([]byte(`<p>x</p><div class="views">11 views</div>`))
	if a != b {
		t.Fatal("a route pattern's matches still count")
	}
	if _, err := New(true, []string{"ok", "("}); err == nil || !strings.Contains(err.Error(), "pattern 1") {
		t.Fatalf("a bad pattern: %v", err)
	}
}

func TestDigestNeverZeroAndStable(t *testing.T) {
	n := mustNew(t, true)
	for _, s := range []string{"", "a", "<html></html>"} {
		d := n.Digest([]byte(s))
		if d == 0 || d != n.Digest([]byte(s)) {
			t.Fatalf("%q: digest %x", s, d)
		}
	}
}

// BenchmarkDigest is the cost worker 0 pays per applied render: a 100 KiB page with the
// defaults, and the hash alone, side by side.
func BenchmarkDigest(b *testing.B) {
	body := []byte(strings.Repeat(`<div class="p"><a href="/p/123?x=1">Product 123</a><img src="/i/123.jpg?w=300"> <span>2026-12-02T09:00:00Z</span> 19.99 €</div>`+"\n", 800))
	b.Run("defaults", func(b *testing.B) {
		n := mustNew(b, true)
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			n.Digest(body)
		}
	})
	b.Run("hash-only", func(b *testing.B) {
		n := mustNew(b, false)
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			n.Digest(body)
		}
	})
}

// No input makes a scanner panic or loop: every prefix and a few mangled forms of a page rich
// in what the scanners look for.
func TestScannersTotal(t *testing.T) {
	page := `<meta name=csrf-token content=x><input name="_token" value='y'><script nonce=abc src="/a.0123abcd.js?v=1"></script> 2026-12-02T09:00:00.5+01:00 2026-12-02 10:00 .css? -.js x.0123456789.woff2`
	n := mustNew(t, true)
	for i := range len(page) + 1 {
		for _, s := range []string{page[:i], page[i:], strings.ReplaceAll(page[:i], ">", "")} {
			n.Digest([]byte(s))
		}
	}
}
