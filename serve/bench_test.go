package serve

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/store"
)

// discard is a ResponseWriter that keeps nothing, so that a benchmark measures the handler,
// not a recorder's buffer.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkServeHit is the crawler listener's cost of one hit, the handler alone (no
// connection, no HTTP parsing): benchPages stored pages of ~30 KB, gzipped as a render's are,
// asked for by a Zipf law (s = 1.1) with the crawl token, accepting gzip.
func BenchmarkServeHit(b *testing.B) {
	const benchPages = 10_000
	n := newNode(b, baseYAML)
	html := strings.Repeat("<li class=product><a href=/p/1>a product</a> 19.99</li>\n", 30_000/56)
	ws := make([]store.Write, 0, benchPages)
	for i := range benchPages {
		url := fmt.Sprintf("https://shop.test/c/%07d", i)
		body, headers := intake.CompressPage([]byte(fmt.Sprintf("<!doctype html><title>%d</title>%s", i, html)),
			[]store.Header{{Name: "content-type", Value: "text/html; charset=utf-8"}})
		sch, err := store.NewSchedule([]byte("desktop|"+url), start+3_600_000, true, 3_600_000, store.Lanes{})
		if err != nil {
			b.Fatal(err)
		}
		ws = append(ws, store.Write{Schedule: sch, Target: &store.Target{URL: url, Device: "desktop", Source: store.SourceSitemap},
			Page: &store.Page{Status: 200, Headers: headers, Body: body, RenderedAtMs: start}})
	}
	if err := n.Store.WriteSchedules(ws); err != nil {
		b.Fatal(err)
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(7, 7)), 1.1, 1, benchPages-1)
	reqs := make([]*http.Request, 4096)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/https://shop.test/c/%07d", z.Uint64()), nil)
		r.RemoteAddr = "10.0.0.1:4000"
		r.Header.Set(HeaderToken, "crawl-token")
		r.Header.Set("Accept-Encoding", "gzip")
		r.Header.Set("User-Agent", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)")
		reqs[i] = r
	}
	w := &discard{h: http.Header{}}
	n.h.ServeHTTP(w, reqs[0])
	if w.h.Get(HeaderCache) != ResultHit {
		b.Fatalf("the first request got %q, want a hit", w.h.Get(HeaderCache))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		clear(w.h)
		n.h.ServeHTTP(w, reqs[i%len(reqs)])
	}
}
