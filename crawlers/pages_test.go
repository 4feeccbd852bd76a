package crawlers

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// A page's counts are per family and per answer, with the last request's time, and the table
// says nothing of a page no crawler asked for.
func TestPageTallyCountsByFamily(t *testing.T) {
	var pt PageTally
	k := []byte("desktop|https://shop.test/p/1")
	pt.Note(k, Google, GotHit, 1000)
	pt.Note(k, Google, GotStale, 2000)
	pt.Note(k, Google, GotHit, 3000)
	pt.Note(k, Bing, GotMiss, 2500)
	pt.Note(k, Other, GotRefused, 4000)
	pt.Note(k, "nobody", GotHit, 5000)     // not a family: not counted
	pt.Note(k, Google, "teapot", 5000)     // not an answer: not counted
	pt.Note([]byte(""), Google, GotHit, 5) // no key: not counted
	got := pt.Page(k)
	want := PageCounts{Tracked: true, SinceMs: 1000, Families: []FamilyCount{
		{Family: Google, Requests: 3, Hit: 2, Stale: 1, LastMs: 3000},
		{Family: Bing, Requests: 1, Miss: 1, LastMs: 2500},
		{Family: Other, Requests: 1, Refused: 1, LastMs: 4000},
	}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Page:\n got %+v\nwant %+v", got, want)
	}
	if other := pt.Page([]byte("desktop|https://shop.test/p/2")); other.Tracked || len(other.Families) != 0 {
		t.Errorf("a page never asked for: %+v", other)
	}
	if s := pt.Stats(); s.Pages != 1 || s.Bytes != entryCost(len(k), 3) {
		t.Errorf("Stats %+v, want 1 page of %d bytes", s, entryCost(len(k), 3))
	}
	var nilTally *PageTally
	nilTally.Note(k, Google, GotHit, 1)
	if p := nilTally.Page(k); p.Tracked {
		t.Error("a nil tally tracks a page")
	}
}

// A flood of distinct URLs, each asked once (what anyone on the internet can send), cannot
// grow the table past its bounds in pages or bytes, and does not evict the pages crawlers
// come back to: those keep their exact counts.
func TestPageTallyFloodCannotGrowIt(t *testing.T) {
	pt := PageTally{MaxPages: 100, MaxBytes: 32 << 10}
	hot := make([][]byte, 50)
	for i := range hot {
		hot[i] = fmt.Appendf(nil, "desktop|https://shop.test/p/%d", i)
		pt.Note(hot[i], Google, GotHit, 1)
		pt.Note(hot[i], Google, GotHit, 2) // asked again: protected
	}
	long := strings.Repeat("x", 1500)
	for i := range 200_000 {
		k := fmt.Appendf(nil, "desktop|https://flood.test/%d", i)
		if i%3 == 0 {
			k = fmt.Appendf(k, "/%s", long) // long keys: the bytes bind before the pages
		}
		pt.Note(k, Other, GotMiss, int64(10+i))
		if s := pt.Stats(); s.Pages > 100 || s.Bytes > 32<<10 {
			t.Fatalf("after %d flooded URLs the table holds %d pages, %d bytes: over its bounds", i+1, s.Pages, s.Bytes)
		}
	}
	s := pt.Stats()
	if s.Evicted < 200_000-100 {
		t.Errorf("evicted %d of 200,000 flooded pages into a table of 100", s.Evicted)
	}
	for _, k := range hot {
		got := pt.Page(k)
		if !got.Tracked || len(got.Families) != 1 || got.Families[0].Hit != 2 || got.Families[0].LastMs != 2 {
			t.Fatalf("%s after the flood: %+v, want its 2 hits kept", k, got)
		}
	}
	// The memory actually held is the estimate's: the map and both lists agree with it.
	pt.mu.Lock()
	defer pt.mu.Unlock()
	bytes, n := 0, 0
	for _, l := range []*segment{&pt.probation, &pt.protected} {
		for e := l.head; e != nil; e = e.next {
			bytes += e.cost()
			n++
			if cap(e.fams) != len(e.fams) {
				t.Fatalf("%s: %d families with room for %d: the estimate counts len", e.key, len(e.fams), cap(e.fams))
			}
		}
	}
	if n != len(pt.m) || bytes != pt.bytes {
		t.Errorf("the lists hold %d pages of %d bytes; the map %d, the count %d bytes", n, bytes, len(pt.m), pt.bytes)
	}
}

// The least used page goes first: among pages asked once, the least recently asked; a page
// asked again outlives every page asked once; an evicted page that comes back counts from
// zero, from its new Since. A key too long to fit is not counted at all.
func TestPageTallyEvictsTheLeastUsed(t *testing.T) {
	pt := PageTally{MaxPages: 5}
	key := func(i int) []byte { return fmt.Appendf(nil, "desktop|https://a.test/%d", i) }
	pt.Note(key(0), Google, GotHit, 1)
	pt.Note(key(0), Google, GotHit, 2) // protected
	for i := 1; i <= 4; i++ {
		pt.Note(key(i), Bing, GotHit, int64(10+i))
	}
	pt.Note(key(5), Bing, GotHit, 20) // full: key 1, asked once and least recently, goes
	for i, want := range []bool{true, false, true, true, true, true} {
		if got := pt.Page(key(i)).Tracked; got != want {
			t.Errorf("page %d tracked %v, want %v", i, got, want)
		}
	}
	pt.Note(key(1), Bing, GotStale, 30) // back: from zero
	if got := pt.Page(key(1)); got.SinceMs != 30 || got.Families[0].Requests != 1 || got.Families[0].Stale != 1 {
		t.Errorf("an evicted page come back: %+v, want 1 request since 30", got)
	}
	if got := pt.Page(key(0)); got.Families[0].Hit != 2 {
		t.Errorf("the page asked twice: %+v", got)
	}
	small := PageTally{MaxBytes: 1024}
	small.Note([]byte("desktop|https://a.test/"+strings.Repeat("y", 1000)), Google, GotHit, 1)
	if s := small.Stats(); s.Pages != 0 || s.Bytes != 0 {
		t.Errorf("a key larger than the table: %+v", s)
	}
}

// Concurrent requests for the same pages lose no count (run with -race).
func TestPageTallyConcurrent(t *testing.T) {
	pt := PageTally{MaxPages: 1000}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				pt.Note(fmt.Appendf(nil, "desktop|https://a.test/%d", i%10), Families[g%len(Families)], GotHit, int64(i))
			}
		}()
	}
	wg.Wait()
	total := uint64(0)
	for i := range 10 {
		for _, f := range pt.Page(fmt.Appendf(nil, "desktop|https://a.test/%d", i)).Families {
			total += f.Requests
		}
	}
	if total != 8000 {
		t.Errorf("counted %d requests of 8000", total)
	}
}
