package fuzz

import (
	"bytes"
	"strings"
	"testing"

	"github.com/freshq/freshq/sitemap"
)

// FuzzSitemapParse feeds arbitrary documents to the streaming sitemap parser behind POST
// /v1/sitemaps: never a panic; output bounded by the input (an entry costs at least the six
// bytes of "<url/>", a field at most sitemap.MaxField bytes, and XML entities cannot expand
// since no DTD is honoured); and the parse is deterministic, which the ingest relies on: it
// parses a file once to check it and again to store it, so a file that passed the check must
// give the same entries the second time.
func FuzzSitemapParse(f *testing.F) {
	urlset := `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url><loc>https://a.test/</loc><lastmod>2026-11-01</lastmod><changefreq>daily</changefreq><priority>0.8</priority>
    <image:image><image:loc>https://cdn.test/i.jpg</image:loc></image:image></url>
  <url><loc><![CDATA[https://a.test/?q=1&x=2]]></loc><changefreq>hourly</changefreq></url>
  <url><loc>https://a.test/&amp;&#x41;</loc></url>
</urlset>`
	index := `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://a.test/s1.xml.gz</loc><lastmod>2026-11-29T00:00:00Z</lastmod></sitemap>
  <sitemap><loc>https://a.test/s2.xml</loc></sitemap>
</sitemapindex>`
	for _, doc := range []string{urlset, index} {
		f.Add([]byte(doc))
		for _, n := range []int{1, 10, len(doc) / 3, len(doc) / 2, len(doc) - 12, len(doc) - 1} {
			f.Add([]byte(doc[:n])) // truncated, as a dropped download leaves it
		}
	}
	f.Add([]byte(urlset[:len(urlset)/2] + "<url><loc>https://a.test/half</lo")) // half-written entry
	f.Add([]byte(`<urlset><url><loc>` + strings.Repeat("x", sitemap.MaxField+10) + `</loc></url></urlset>`))
	f.Add([]byte(`<!DOCTYPE urlset [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><urlset><url><loc>&b;</loc></url></urlset>`))
	f.Add([]byte(`<urlset><url><loc>https://a.test/</loc></url><!--` + strings.Repeat("x", sitemap.MaxToken+10) + `--></urlset>`)) // a token over the budget
	f.Add([]byte(`<urlset><url><loc>https://a.test/</loc><x a="` + strings.Repeat("y", sitemap.MaxToken) + `"/></url></urlset>`))
	f.Add([]byte(`<urlset></urlset><urlset/>`))
	f.Add([]byte(`<html><body/></html>`))
	f.Add([]byte(`<?xml version="1.0" encoding="ISO-8859-1"?><urlset/>`))
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	f.Fuzz(func(t *testing.T, doc []byte) {
		var first []sitemap.Entry
		kind, err := sitemap.Parse(bytes.NewReader(doc), func(e sitemap.Entry) error {
			for _, s := range []string{e.Loc, e.LastMod, e.ChangeFreq, e.Priority} {
				if len(s) > sitemap.MaxField {
					t.Fatalf("a field of %d bytes", len(s))
				}
				if strings.TrimSpace(s) != s {
					t.Fatalf("untrimmed field %q", s)
				}
			}
			first = append(first, e)
			if len(first) > len(doc)/6+1 {
				t.Fatalf("%d entries from a %d-byte document", len(first), len(doc))
			}
			return nil
		})
		if err == nil && kind != sitemap.URLSet && kind != sitemap.Index {
			t.Fatalf("parsed without error but kind %d", kind)
		}
		var second []sitemap.Entry
		kind2, err2 := sitemap.Parse(bytes.NewReader(doc), func(e sitemap.Entry) error {
			second = append(second, e)
			return nil
		})
		if kind2 != kind || (err == nil) != (err2 == nil) || len(second) != len(first) {
			t.Fatalf("not deterministic: %v %v %d, then %v %v %d", kind, err, len(first), kind2, err2, len(second))
		}
		for i := range first {
			if first[i] != second[i] {
				t.Fatalf("entry %d: %+v then %+v", i, first[i], second[i])
			}
		}
	})
}
