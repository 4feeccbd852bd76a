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
// and a restart loses at most two half-lives of counts. A generation holds at most maxKeys keys;
// a request for a key beyond that is counted in Untracked only, so memory stays bounded
// whatever crawlers ask for.
//
// Besides, it keeps the requests counted since the last Take (at most MaxKeys keys too), which
// worker 0 writes into the targets' decayed request counters in one batch a flush
// (freshness.demand_flush): the rows learn their demand without a write per request.
type Demand struct {
	HalfLifeMs int64
	MaxKeys    int

	mu        sync.Mutex
	cur, prev map[string]uint32
	startMs   int64
	untracked uint64
	pending   map[string]uint32
}

// Take returns the requests counted per key since the previous Take, and starts counting
// anew. The map is the caller's.
func (d *Demand) Take() map[string]uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pending
	d.pending = nil
	return p
}

// Return gives back counts a flush could not write, to be written with the next one. Within
// MaxKeys: when not all fit, the keys asked for most are kept (ties by key), so what is
// dropped is the least, and the same whatever the map's order.
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

// addPending counts n requests of key for the next Take, unless MaxKeys other keys are
// pending (Untracked counts the generations' misses, not these); d.mu is held.
func (d *Demand) addPending(key string, n uint32) {
	if d.pending == nil {
		d.pending = map[string]uint32{}
	}
	if c, ok := d.pending[key]; ok || len(d.pending) < d.MaxKeys {
		d.pending[key] = c + n
	}
}

// Note counts one request for key at nowMs.
func (d *Demand) Note(key []byte, nowMs int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rotate(nowMs)
	d.addPending(string(key), 1)
	if n, ok := d.cur[string(key)]; ok || len(d.cur) < d.MaxKeys {
		d.cur[string(key)] = n + 1
		return
	}
	d.untracked++
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
		d.cur, d.startMs = map[string]uint32{}, nowMs
	case nowMs-d.startMs >= 2*d.HalfLifeMs:
		d.cur, d.prev, d.startMs = map[string]uint32{}, nil, nowMs
	case nowMs-d.startMs >= d.HalfLifeMs:
		d.prev, d.cur, d.startMs = d.cur, map[string]uint32{}, d.startMs+d.HalfLifeMs
	}
}
