package sitemap

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/testkit/qtest"
)

// The parser alone over a 50,000-URL file (the protocol's maximum per file): memory is bounded by
// a tag, not by the document.
func TestSitemapParse50kFlatMemory(t *testing.T) {
	const n = 50_000
	pr, pw := io.Pipe()
	var size int64
	go func() { size = qtest.WriteProducts(pw, n); pw.Close() }()
	var got int
	var err error
	base, peak := qtest.PeakHeap(func() {
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
	t.Logf("parsing 50,000 URLs (%.1f MiB of XML): heap in use %.1f MiB before, peak %.1f MiB (+%.2f MiB)", qtest.MiB(uint64(size)), qtest.MiB(base), qtest.MiB(peak), qtest.MiB(peak-min(peak, base)))
	if peak > base+8<<20 {
		t.Fatalf("the parser's heap grew by %.1f MiB over 50,000 URLs", qtest.MiB(peak-base))
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
		body := io.MultiReader(strings.NewReader(open), qtest.Repeat('x', 64<<20), strings.NewReader(close))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Parse(body, func(Entry) error { return nil })
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprint(MaxToken)) {
			t.Errorf("%s: a 64 MiB token: %v", where, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<20 {
			t.Errorf("%s: a 64 MiB token allocated %.1f MiB", where, qtest.MiB(alloc))
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
