package qtest

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"time"
)

// PeakHeap runs fn while sampling the heap in use, and returns the heap before and at its peak.
func PeakHeap(fn func()) (base, peak uint64) { return PeakHeapEvery(5*time.Millisecond, fn) }

// PeakHeapEvery is PeakHeap sampling every d.
//
// While fn runs the collector runs after every 5 % of growth instead of the default 100 %, so
// that the heap in use is what fn holds, not garbage the collector has not reached yet: with a
// base of 45 MiB the default lets 45 MiB of garbage pile up, which made the peak depend on
// when the collector happened to run rather than on what fn kept.
func PeakHeapEvery(d time.Duration, fn func()) (base, peak uint64) {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
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

// MiB is b bytes in mebibytes, for a test's log.
func MiB(b uint64) float64 { return float64(b) / (1 << 20) }

// Repeat is a reader of n copies of b, for bodies too large to hold.
func Repeat(b byte, n int) io.Reader { return &repeatReader{b: b, n: n} }

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

// WriteProducts writes a urlset of n product URLs with every optional tag to w, as a
// generator (the document is never held in memory), and returns its size.
func WriteProducts(w io.Writer, n int) int64 {
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
