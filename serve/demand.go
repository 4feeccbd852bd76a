package serve

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Demand counts crawler requests per cache key, decayed: which pages crawlers actually ask for,
// which the scheduler needs besides how old a page is. It keeps two generations of counts; every
// half-life the current one becomes the previous one and a new one starts, so a key's count is
// its requests in the current generation plus half of those in the previous one, and a key
// nobody asks for is forgotten after two half-lives.
//
// The counts live in worker 0's memory, not in the schedule row: a hit must not wait on a write,
// and a restart loses at most two half-lives of counts. The handler counts a request only once
// its key was found stored (a hit, a stale page, or a miss it rendered): a key nobody stores
// has no row to write the count into, and counting it would let anyone fill memory with URLs.
// With crawler verification on it counts only a request whose claim is verified
// (Handler.countsDemand): anyone can write a crawler's User-Agent, and demand decides which
// pages get the scarce renders.
//
// Memory is bounded by bytes, not keys, since a key may be up to the store's key limit long:
// MaxBytes (serve.demand_bytes) is shared in thirds by the current generation, the previous one
// (a former current one, so within its third) and the requests pending for the next flush. A
// key's cost is its length plus entryOverhead, what a map entry and its string take besides.
// A request for a key its map has no room for is counted in Untracked only (or, for the
// pending counts, dropped until the next flush), so memory stays bounded whatever crawlers ask
// for.
//
// Besides, it keeps the requests counted since the last Take, which worker 0 writes into the
// targets' decayed request counters in one batch a flush (freshness.demand_flush): the rows
// learn their demand without a write per request.
type Demand struct {
	HalfLifeMs int64
	MaxBytes   int64

	mu                  sync.Mutex
	cur, prev           map[string]uint32
	curBytes, prevBytes int64
	startMs             int64
	untracked           uint64
	pending             map[string]uint32
	pendingBytes        int64
}

// entryOverhead is what a counted key costs besides its bytes: the map's slot (string header,
// count, tophash), its share of the map's spare capacity, and the string allocation's rounding.
const entryOverhead = 64

// cost is what counting key takes of the budget.
func cost(key string) int64 { return int64(len(key)) + int64(len(key))/8 + entryOverhead }

// share is each map's third of MaxBytes.
func (d *Demand) share() int64 { return d.MaxBytes / 3 }

// Bytes is the budget in use: what the generations and the pending counts hold.
func (d *Demand) Bytes() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.curBytes + d.prevBytes + d.pendingBytes
}

// Take returns the requests counted per key since the previous Take, and starts counting
// anew. The map is the caller's.
func (d *Demand) Take() map[string]uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pending
	d.pending, d.pendingBytes = nil, 0
	return p
}

// Return gives back counts a flush could not write, to be written with the next one. Within
// the pending share of MaxBytes: when not all fit, the keys asked for most are kept (ties by
// key), so what is dropped is the least, and the same whatever the map's order.
func (d *Demand) Return(counts map[string]uint32) {
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range keys {
		d.addPending(k, counts[k])
	}
}

// addPending counts n requests of key for the next Take, unless the pending counts have no
// room for it (Untracked counts the generations' misses, not these); d.mu is held.
func (d *Demand) addPending(key string, n uint32) {
	if d.pending == nil {
		d.pending = map[string]uint32{}
	}
	c, ok := d.pending[key]
	if !ok {
		if d.pendingBytes+cost(key) > d.share() {
			return
		}
		d.pendingBytes += cost(key)
	}
	d.pending[key] = c + n
}

// Note counts one request for key at nowMs: a key found stored (see Demand).
func (d *Demand) Note(key []byte, nowMs int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rotate(nowMs)
	// One string for both maps: a new key's bytes are held once.
	var s string
	if n, ok := d.cur[string(key)]; ok {
		d.cur[string(key)] = n + 1
	} else if s = string(key); d.curBytes+cost(s) <= d.share() {
		d.cur[s], d.curBytes = 1, d.curBytes+cost(s)
	} else {
		d.untracked++
	}
	if _, ok := d.pending[string(key)]; ok {
		d.pending[string(key)]++
		return
	}
	if s == "" {
		s = string(key)
	}
	d.addPending(s, 1)
}

// Count is key's decayed request count at nowMs.
func (d *Demand) Count(key []byte, nowMs int64) float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rotate(nowMs)
	return float64(d.cur[string(key)]) + float64(d.prev[string(key)])/2
}

// Untracked is how many requests found their generation full.
func (d *Demand) Untracked() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.untracked
}

// rotate starts a new generation once a half-life has passed (two: both are dropped); d.mu is held.
func (d *Demand) rotate(nowMs int64) {
	switch {
	case d.cur == nil:
		d.cur, d.curBytes, d.startMs = map[string]uint32{}, 0, nowMs
	case nowMs-d.startMs >= 2*d.HalfLifeMs:
		d.cur, d.prev, d.curBytes, d.prevBytes, d.startMs = map[string]uint32{}, nil, 0, 0, nowMs
	case nowMs-d.startMs >= d.HalfLifeMs:
		d.prev, d.prevBytes = d.cur, d.curBytes
		d.cur, d.curBytes, d.startMs = map[string]uint32{}, 0, d.startMs+d.HalfLifeMs
	}
}
