package crawlers

import (
	"slices"
	"sync"
)

// PageTally counts the crawler listener's requests per page (a cache key) and family, for the
// console's page view: which bots asked for a page, how often, what they got and when last.
//
// The crawler listener is on the internet and anyone may ask for millions of distinct URLs, so
// the tally keeps a bounded table, not every page: at most MaxPages pages and MaxBytes bytes
// of them (their keys and counts, by the estimate entryCost), whatever the requests. The
// table is a segmented LRU: a page enters on probation; asked again while there, it moves to
// the protected segment (at most 4/5 of the pages); the protected segment's least recently
// asked page falls back to probation when the segment is full, and a page is evicted from
// probation's least recently asked end. So a flood of URLs each asked once churns probation
// only, and the pages crawlers come back to stay. A page's counts are exact from its Since:
// an evicted page that comes back starts again from zero, with a new Since.
//
// Safe for concurrent use; one mutex, held for a map lookup and a few pointer moves.
type PageTally struct {
	// MaxPages and MaxBytes bound the table; 0: DefaultMaxPages, DefaultMaxBytes.
	MaxPages int
	MaxBytes int

	mu        sync.Mutex
	m         map[string]*pageEntry
	probation segment
	protected segment
	bytes     int
	evicted   uint64
}

// The default bounds: 10,000 pages, 4 MiB (a 2 KiB key, the longest the store takes, costs
// about 2.4 KiB with its counts: the bytes bind first for long URLs, the pages for short ones).
const (
	DefaultMaxPages = 10_000
	DefaultMaxBytes = 4 << 20
)

// entryOverhead is what a page costs besides its key and families: the entry, its map slot
// and the list pointers, rounded up. famCost is one family's counts.
const (
	entryOverhead = 160
	famCost       = 32
)

type pageEntry struct {
	key        string
	since      int64 // ms: first counted since it entered the table
	fams       []famCount
	prev, next *pageEntry
	protected  bool
}

type famCount struct {
	family                   uint8 // index in Families
	hit, stale, miss, refuse uint32
	last                     int64 // ms
}

func (e *pageEntry) cost() int { return entryCost(len(e.key), len(e.fams)) }

func entryCost(keyLen, fams int) int { return entryOverhead + keyLen + fams*famCost }

// segment is one of the table's two segments: an intrusive doubly-linked list, the most
// recently asked page at the front.
type segment struct {
	head, tail *pageEntry
	n          int
}

func (l *segment) pushFront(e *pageEntry) {
	e.prev, e.next = nil, l.head
	if l.head != nil {
		l.head.prev = e
	} else {
		l.tail = e
	}
	l.head = e
	l.n++
}

func (l *segment) remove(e *pageEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
	l.n--
}

func (t *PageTally) limits() (pages, bytes int) {
	pages, bytes = t.MaxPages, t.MaxBytes
	if pages <= 0 {
		pages = DefaultMaxPages
	}
	if bytes <= 0 {
		bytes = DefaultMaxBytes
	}
	return pages, bytes
}

// Note counts one answer (got: GotHit, GotStale, GotMiss, GotRefused) of a request of family
// (a Families name) for the page key at nowMs. Anything else, and a key whose page could
// alone exceed MaxBytes (with every family counted), is not counted.
func (t *PageTally) Note(key []byte, family, got string, nowMs int64) {
	if t == nil || len(key) == 0 {
		return
	}
	f := slices.Index(Families, family)
	if f < 0 || (got != GotHit && got != GotStale && got != GotMiss && got != GotRefused) {
		return
	}
	maxPages, maxBytes := t.limits()
	if entryCost(len(key), len(Families)) > maxBytes {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*pageEntry{}
	}
	e := t.m[string(key)] // no allocation for the lookup
	if e == nil {
		e = &pageEntry{key: string(key), since: nowMs}
		t.m[e.key] = e
		t.probation.pushFront(e)
		t.bytes += e.cost()
	} else if e.protected {
		t.protected.remove(e)
		t.protected.pushFront(e)
	} else { // asked again on probation: protected from now on
		t.probation.remove(e)
		e.protected = true
		t.protected.pushFront(e)
	}
	i := slices.IndexFunc(e.fams, func(c famCount) bool { return int(c.family) == f })
	if i < 0 {
		// Grown by one, exactly: the estimate counts len, so cap must be len.
		fams := make([]famCount, len(e.fams)+1)
		copy(fams, e.fams)
		fams[len(e.fams)].family = uint8(f)
		e.fams, i = fams, len(e.fams)
		t.bytes += famCost
	}
	c := &e.fams[i]
	switch got {
	case GotHit:
		c.hit++
	case GotStale:
		c.stale++
	case GotMiss:
		c.miss++
	case GotRefused:
		c.refuse++
	}
	c.last = nowMs
	// The protected segment holds at most 4/5 of the pages: its oldest go back on probation.
	for t.protected.n > maxPages-maxPages/5 && t.protected.tail != nil {
		old := t.protected.tail
		t.protected.remove(old)
		old.protected = false
		t.probation.pushFront(old)
	}
	for len(t.m) > maxPages || t.bytes > maxBytes {
		victim := t.probation.tail // the page just asked is at its segment's front: the tail only when alone there
		if victim == nil || victim == e {
			victim = t.protected.tail
		}
		if victim == nil || victim == e {
			break // e alone: it fits, by the check of its largest cost above
		}
		t.evict(victim)
	}
}

func (t *PageTally) evict(e *pageEntry) {
	if e.protected {
		t.protected.remove(e)
	} else {
		t.probation.remove(e)
	}
	delete(t.m, e.key)
	t.bytes -= e.cost()
	t.evicted++
}

// FamilyCount is one family's requests for a page.
type FamilyCount struct {
	Family   string `json:"family"`
	Requests uint64 `json:"requests"` // hit + stale + miss + refused
	Hit      uint64 `json:"hit"`
	Stale    uint64 `json:"stale"`
	Miss     uint64 `json:"miss"`
	Refused  uint64 `json:"refused"`
	LastMs   int64  `json:"last_ms"` // the last request's time, unix ms
}

// PageCounts is what the tally holds of one page: Tracked false when the page is not in the
// table (never asked for by a crawler, or evicted), and then no family.
type PageCounts struct {
	Tracked  bool          `json:"tracked"`
	SinceMs  int64         `json:"since_ms,omitempty"` // counted from (unix ms): when it entered the table
	Families []FamilyCount `json:"families"`           // in Families order
}

// Page returns the counts of the page key.
func (t *PageTally) Page(key []byte) PageCounts {
	out := PageCounts{Families: []FamilyCount{}}
	if t == nil {
		return out
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[string(key)]
	if e == nil {
		return out
	}
	out.Tracked, out.SinceMs = true, e.since
	for _, c := range e.fams {
		fc := FamilyCount{Family: Families[c.family], Hit: uint64(c.hit), Stale: uint64(c.stale), Miss: uint64(c.miss),
			Refused: uint64(c.refuse), LastMs: c.last}
		fc.Requests = fc.Hit + fc.Stale + fc.Miss + fc.Refused
		out.Families = append(out.Families, fc)
	}
	slices.SortFunc(out.Families, func(a, b FamilyCount) int {
		return slices.Index(Families, a.Family) - slices.Index(Families, b.Family)
	})
	return out
}

// PageTallyStats is the table's size against its bounds.
type PageTallyStats struct {
	Pages    int    `json:"pages"`
	Bytes    int    `json:"bytes"`
	MaxPages int    `json:"max_pages"`
	MaxBytes int    `json:"max_bytes"`
	Evicted  uint64 `json:"evicted"`
}

// Stats returns the table's size, its bounds and the pages evicted so far.
func (t *PageTally) Stats() PageTallyStats {
	if t == nil {
		return PageTallyStats{}
	}
	maxPages, maxBytes := t.limits()
	t.mu.Lock()
	defer t.mu.Unlock()
	return PageTallyStats{Pages: len(t.m), Bytes: t.bytes, MaxPages: maxPages, MaxBytes: maxBytes, Evicted: t.evicted}
}
