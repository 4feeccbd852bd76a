package fuzz

import (
	"bytes"
	"testing"

	"github.com/freshq/freshq/pagedigest"
)

// FuzzPageDigest drives the content digest's hand-written scanners (nonces, CSRF tokens,
// date-times, asset cache-busters) with any page, as worker 0 runs them on every rendered body
// it applies: they never panic or loop, never change the body they are given, and the digest
// is the same for the same bytes and never 0 (0 is "no digest yet" in a target).
func FuzzPageDigest(f *testing.F) {
	for _, s := range []string{
		`<meta name=csrf-token content=x><input name="_token" value='y'><script nonce=abc src="/a.0123abcd.js?v=1"></script>`,
		`2026-12-02T09:00:00.5+01:00 2026-12-02 10:00 .css? -.js x.0123456789.woff2`,
		`<script nonce="`, `content='`, `.js?`, `9999-99-99T`, "",
	} {
		f.Add([]byte(s))
	}
	n, err := pagedigest.New(true, []string{`<!--[^>]*-->`})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		kept := bytes.Clone(body)
		d := n.Digest(body)
		if !bytes.Equal(body, kept) {
			t.Fatalf("the digest changed the body it was given: %q → %q", kept, body)
		}
		if d == 0 || n.Digest(body) != d {
			t.Fatalf("digest %#x of %q: 0, or not the same twice", d, body)
		}
	})
}
