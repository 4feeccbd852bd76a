package render

import (
	"strings"
	"testing"
)

func TestHeaderNoindex(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   bool
	}{
		{nil, false},
		{[]string{"noindex"}, true},
		{[]string{"NoIndex"}, true},
		{[]string{"none"}, true},
		{[]string{"nofollow, noindex"}, true},
		{[]string{"nofollow,noarchive"}, false},
		{[]string{"index, follow"}, false},
		{[]string{"googlebot: noindex"}, true},
		{[]string{"Googlebot: nofollow, noindex"}, true}, // the scope covers the items after it
		{[]string{"bingbot: noindex"}, false},
		{[]string{"bingbot: noindex, nofollow"}, false},
		{[]string{"bingbot: noarchive, googlebot: none"}, true},
		{[]string{"googlebot: nofollow", "otherbot: noindex"}, false},
		{[]string{"otherbot: noindex", "noindex"}, true}, // a new header value starts unscoped
		{[]string{"unavailable_after: Sunday, 01-Jan-2040 00:00:00 GMT"}, false},
		{[]string{"unavailable_after: 2040-01-01, noindex"}, true},
		{[]string{"max-snippet: 20, noindex"}, true},
		{[]string{"noindexer"}, false},
		{[]string{""}, false},
	} {
		if got := headerNoindex(tc.values); got != tc.want {
			t.Errorf("headerNoindex(%q) = %v, want %v", tc.values, got, tc.want)
		}
	}
}

func TestMetaNoindex(t *testing.T) {
	for _, tc := range []struct {
		page string
		want bool
	}{
		{`<html><head><meta name="robots" content="noindex"></head><body></body></html>`, true},
		{`<html><head><META NAME="ROBOTS" CONTENT="NOINDEX,FOLLOW"></head></html>`, true},
		{`<html><head><meta name=robots content="nofollow, noindex"/></head></html>`, true},
		{`<html><head><meta content="none" name="googlebot"></head></html>`, true},
		{`<html><head><meta name="robots" content="noindex nofollow"></head></html>`, true},
		{`<meta name="robots" content="noindex">`, true}, // no head, no body: still the head
		{`<!doctype html><html><head><title>x</title><meta charset="utf-8"><meta name="robots" content="noindex"></head></html>`, true},
		{`<html><head><meta name="robots" content="index, follow"></head></html>`, false},
		{`<html><head><meta name="bingbot" content="noindex"></head></html>`, false},
		{`<html><head><meta name="description" content="noindex"></head></html>`, false},
		{`<html><head><meta name="robots"></head></html>`, false},
		{`<html><head><meta http-equiv="robots" content="noindex"></head></html>`, false},
		{`<html><head></head><body><meta name="robots" content="noindex"></body></html>`, false}, // only the head counts
		{`<html><body><p>hi</p><meta name="robots" content="noindex"></body></html>`, false},
		{`<html><head><script>var s = '<meta name="robots" content="noindex">';</script></head></html>`, false},
		{`<html><head><!-- <meta name="robots" content="noindex"> --></head></html>`, false},
		{`<html><head><title><meta name="robots" content="noindex"></title></head></html>`, false},
		{``, false},
		{"\x00\xff<<<>>>", false},
	} {
		if got := metaNoindex([]byte(tc.page)); got != tc.want {
			t.Errorf("metaNoindex(%q) = %v, want %v", tc.page, got, tc.want)
		}
	}
}

func TestMetaNoindexStopsAtTheHead(t *testing.T) {
	// A large body after the head is not tokenized: the scan ends at <body>.
	page := `<html><head><title>t</title></head><body>` + strings.Repeat(`<div class="x">text</div>`, 1<<16) +
		`<meta name="robots" content="noindex"></body></html>`
	if metaNoindex([]byte(page)) {
		t.Fatal("a meta tag in the body counted")
	}
}

func TestIsHTML(t *testing.T) {
	for ct, want := range map[string]bool{
		"": true, "text/html": true, "text/html; charset=utf-8": true, "TEXT/HTML": true, "application/xhtml+xml": true,
		"application/json": false, "application/pdf": false, "text/plain": false, "text/html;;bad": true,
	} {
		if got := isHTML(ct); got != want {
			t.Errorf("isHTML(%q) = %v, want %v", ct, got, want)
		}
	}
}
