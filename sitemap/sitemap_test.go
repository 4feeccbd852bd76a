package sitemap

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The parser alone over a 50,000-URL file (the protocol's maximum per file): memory is bounded by
// a tag, not by the document.
func TestSitemapParse50kFlatMemory(t *testing.T) {
	const n = 50_000
	pr, pw := io.Pipe()
	var size int64
	go func() { size = writeProducts(pw, n); pw.Close() }()
	var got int
	var err error
	base, peak := peakHeap(func() {
		_, err = Parse(pr, func(e Entry) error {
			if e.Loc != "" && e.ChangeFreq == "daily" {
				got++
			}
			return nil
		})
	})
	if err != nil || got != n {
		t.Fatalf("parsed %d entries: %v", got, err)
	}
	t.Logf("parsing 50,000 URLs (%.1f MiB of XML): heap in use %.1f MiB before, peak %.1f MiB (+%.2f MiB)", mib(uint64(size)), mib(base), mib(peak), mib(peak-min(peak, base)))
	if peak > base+8<<20 {
		t.Fatalf("the parser's heap grew by %.1f MiB over 50,000 URLs", mib(peak-base))
	}
}

func TestChangefreqCadence(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		freq   string
		minTTL time.Duration
		want   time.Duration
		ok     bool
	}{
		{"always", 0, time.Hour, true},
		{"hourly", 0, time.Hour, true},
		{"hourly", 6 * time.Hour, 6 * time.Hour, true},
		{" Daily ", 6 * time.Hour, day, true},
		{"daily", 48 * time.Hour, 48 * time.Hour, true},
		{"weekly", 6 * time.Hour, 7 * day, true},
		{"monthly", 6 * time.Hour, 30 * day, true},
		{"yearly", 6 * time.Hour, 365 * day, true},
		{"never", 6 * time.Hour, 365 * day, true},
		{"never", 400 * day, 365 * day, true}, // never past the longest usable cadence
		{"", 6 * time.Hour, 0, false},
		{"sometimes", 6 * time.Hour, 0, false},
	} {
		got, ok := ChangefreqCadence(c.freq, c.minTTL)
		if got != c.want || ok != c.ok {
			t.Errorf("%q floored at %v: %v %v, want %v %v", c.freq, c.minTTL, got, ok, c.want, c.ok)
		}
	}
}

// A 64 MiB <loc> is refused once MaxToken bytes of it were read, without being held:
// the parse allocates a few buffers, not the text node.
func TestSitemapHugeTextNodeRefusedUnbuffered(t *testing.T) {
	for _, where := range []string{"loc", "comment", "extension"} {
		var open, close string
		switch where {
		case "loc":
			open, close = `<urlset><url><loc>https://shop.test/`, `</loc></url></urlset>`
		case "comment":
			open, close = `<urlset><url><loc>https://shop.test/</loc></url><!--`, `--></urlset>`
		case "extension":
			open, close = `<urlset><url><loc>https://shop.test/</loc><image:image a="`, `"/></url></urlset>`
		}
		body := io.MultiReader(strings.NewReader(open), &repeatReader{b: 'x', n: 64 << 20}, strings.NewReader(close))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Parse(body, func(Entry) error { return nil })
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprint(MaxToken)) {
			t.Errorf("%s: a 64 MiB token: %v", where, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<20 {
			t.Errorf("%s: a 64 MiB token allocated %.1f MiB", where, mib(alloc))
		}
	}
	// Extension elements are skipped token by token: many of them in one entry are fine.
	var b strings.Builder
	b.WriteString(`<urlset xmlns:image="i"><url><loc>https://shop.test/a</loc>`)
	for range 5000 {
		b.WriteString(`<image:image><image:loc>https://shop.test/i.png</image:loc></image:image>`)
	}
	b.WriteString(`</url></urlset>`)
	n := 0
	if _, err := Parse(strings.NewReader(b.String()), func(Entry) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("%d entries, %v", n, err)
	}
}

// writeProducts writes a urlset of n product URLs with every optional tag, as a generator: the
// document is never held in memory.
func writeProducts(w io.Writer, n int) int64 {
	cw := &countWriter{w: w}
	io.WriteString(cw, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for i := range n {
		fmt.Fprintf(cw, "<url><loc>https://shop.test/product/%06d-a-reasonably-long-product-slug</loc><lastmod>2026-11-29</lastmod><changefreq>daily</changefreq><priority>0.5</priority></url>\n", i)
	}
	io.WriteString(cw, "</urlset>\n")
	return cw.n
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// peakHeap runs fn while sampling the heap in use, and returns the heap before and at its peak.
func peakHeap(fn func()) (base, peak uint64) { return peakHeapEvery(5*time.Millisecond, fn) }

// peakHeapEvery is peakHeap sampling every d.
func peakHeapEvery(d time.Duration, fn func()) (base, peak uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak = ms.HeapInuse, ms.HeapInuse
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(d):
			}
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
		}
	}()
	fn()
	close(stop)
	<-sampled
	runtime.ReadMemStats(&ms)
	return base, max(peak, ms.HeapInuse)
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), r.n)]
	for i := range p {
		p[i] = r.b
	}
	r.n -= len(p)
	return len(p), nil
}
