// Package capacity answers the operator's question "does the farm keep up?": the render rate
// the schedule asks for (demand), the render rate the farm delivers (capacity), and what the
// two imply for how late pages will be (the projection).
//
// Vocabulary:
//   - Demand is Σ 1/cadence over every live schedule row, in renders per second, by lane and
//     by route. A row's cadence is the one policy.Cadence resolves for it (carried on the row,
//     else route, stored interval, default), never the gap a backoff filed as its due time. A
//     sealed target (gone, suppressed, beyond the horizon) asks for no renders: its recheck is
//     counted as a render outside the cadences when it happens, not as demand.
//   - The Ledger keeps demand incrementally: every write of worker 0 passes through WrapStore,
//     which tells it the key's new row after the write committed; a delete removes
//     the key's demand. It keeps exact integer counts (rows per lane, route, submitted fact
//     and cadence), so the sums never drift by rounding; only a missed or misordered update
//     can make them drift.
//   - The recount (Ledger.Recount) reads every schedule row and its target and rebuilds the
//     counts exactly. Worker 0 runs it at start and every RecountEvery (under the freshness
//     policy every UntunedRecountEvery until the first tuning, doubling after each); it logs the drift
//     between the incremental figure and the recount (one line, "capacity recount") and
//     replaces the first by the second. A write that lands while the recount reads wins over
//     what the recount read of that key.
//   - The Meter is capacity: renders completed per second over the last MeterWindow, and the
//     share of them that were retries (the row was failing) or rechecks (the target was sealed),
//     which are renders outside the cadences.
//   - Project turns demand, capacity and the backlog into the steady-state age ÷ cadence each
//     lane and route settles at, the time to drain the backlog, and "keeping up" or "falling
//     behind by N renders/h".
//   - Under queue.policy freshness the recount also tunes the threshold and the ceilings
//     production files due times with (TuneFreshness, Service.Freshness): ν from the meter's
//     capacity and every row's estimates, the ceilings from Project, once the meter has
//     counted TuneMinRenders renders or a whole window; the tuning is published
//     whole (freshness.TuningCell) and never computed on a render's path.
//
// Invariants: after Recount returns, the counts equal a recount of the store as of the end of
// the recount, except for keys written concurrently, which hold their latest written state.
// Between recounts, the counts equal the sum of every row's contribution as the writes reported
// them, in the order the ledger saw them.
//
// On a cluster of nodes on PostgreSQL (SetShards) each node's ledger knows every row's shard
// and its Demand counts only the shards the node holds, so the nodes' demands add up to the
// farm's with every shard counted once; its recount reads only those shards (ShardedSource),
// in one statement with the targets joined. Farm sums the figures the nodes publish with
// their heartbeats (Service.Figures) and projects the sum.
//
// Known limits: a row written through another node is counted by its shard's owner when the
// owner renders it or at its next recount; the plan reads every row and a target per row (on
// PostgreSQL, one query per row); the ledger holds one packed entry per row, about 35 bytes
// with the map's own (TestLedgerMemoryPerRow); the lane floors (queue.lanes.min_share) and the
// urgent cap are not modelled by the projection.
package capacity

import (
	"hash/maphash"
	"sort"
	"sync"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// bucket is one class of demand in one shard: the rows of one lane, route and submitted fact.
// shard is 0 outside a cluster (Ledger.Shard unset).
type bucket struct {
	lane      policy.Lane
	submitted bool
	route     string
	shard     int32
}

// class is a bucket over every shard: what Demand reports.
type class struct {
	lane      policy.Lane
	submitted bool
	route     string
}

// entry is what one key contributes, as the ledger last saw it.
type entry struct {
	bucket
	storedMs  int64 // the target's stored interval, mirrored on the row; kept to resolve later writes
	cadenceMs int64 // 0 when the row asks for no renders (sealed)
	sealed    bool
}

// packed is an entry as the ledger keeps it per key: its bucket, cadence and stored interval as
// indexes into the ledger's tables of the distinct values (interner), 16 bytes instead of 56.
// A node holds a few dozen buckets per shard and few distinct intervals, and the ledger one
// entry per row: this is most of worker 0's memory per row beyond Badger's own.
//
// epoch and gone are the recount's marks, kept in the entry's padding so that a recount needs
// no second copy of the rows (recount.go): epoch is the recount that last read or saw a write
// of the key, and gone marks a key deleted while a recount reads, which counts nothing.
type packed struct {
	cadence uint32
	stored  uint32
	bucket  uint32
	epoch   uint16
	sealed  bool
	gone    bool
}

// sameContribution reports whether a and b contribute the same, whatever their marks.
func sameContribution(a, b packed) bool {
	return a.cadence == b.cadence && a.stored == b.stored && a.bucket == b.bucket && a.sealed == b.sealed
}

// interner numbers the distinct buckets and intervals the ledger has seen; numbers are never
// reused, so equal packed values are equal entries. It is safe for concurrent use (a recount
// packs while writes do).
type interner struct {
	mu        sync.Mutex
	buckets   []bucket
	bucketIDs map[bucket]uint32
	ms        []int64
	msIDs     map[int64]uint32
}

func newInterner() *interner {
	return &interner{bucketIDs: map[bucket]uint32{}, msIDs: map[int64]uint32{}}
}

func (in *interner) msID(v int64) uint32 {
	id, ok := in.msIDs[v]
	if !ok {
		id = uint32(len(in.ms))
		in.ms = append(in.ms, v)
		in.msIDs[v] = id
	}
	return id
}

// pack numbers e. Buckets are lane × route × submitted × shard: far fewer than 2³².
func (in *interner) pack(e entry) packed {
	in.mu.Lock()
	defer in.mu.Unlock()
	b, ok := in.bucketIDs[e.bucket]
	if !ok {
		b = uint32(len(in.buckets))
		in.buckets = append(in.buckets, e.bucket)
		in.bucketIDs[e.bucket] = b
	}
	return packed{cadence: in.msID(e.cadenceMs), stored: in.msID(e.storedMs), bucket: b, sealed: e.sealed}
}

func (in *interner) unpack(p packed) entry {
	in.mu.Lock()
	defer in.mu.Unlock()
	return entry{bucket: in.buckets[p.bucket], storedMs: in.ms[p.stored], cadenceMs: in.ms[p.cadence], sealed: p.sealed}
}

// counts are rows per bucket and cadence: demand is Σ n × 1000 / cadenceMs renders per second.
type counts map[bucket]map[int64]int64

func (c counts) add(e entry, n int64) {
	if e.cadenceMs <= 0 {
		return
	}
	m := c[e.bucket]
	if m == nil {
		m = map[int64]int64{}
		c[e.bucket] = m
	}
	if m[e.cadenceMs] += n; m[e.cadenceMs] == 0 {
		delete(m, e.cadenceMs)
		if len(m) == 0 {
			delete(c, e.bucket)
		}
	}
}

// Ledger is the incremental demand of one node's rows. It is safe for concurrent use.
type Ledger struct {
	pol  func() *policy.Policy
	seed maphash.Seed
	// shardOf and owned are a cluster node's (SetShards): the shard of a key, and the shards the
	// node holds now. nil outside a cluster: every key is in shard 0, and every shard counts.
	shardOf func(key []byte) int32
	owned   func() []int32

	in     *interner
	mu     sync.Mutex
	rows   map[uint64]packed // key hash → its contribution (and tombstones while recounting)
	counts counts
	// recounting is set while a Recount reads the store; epoch numbers the recounts, and every
	// write stamps its key's entry with it, so that the recount knows the keys written since it
	// began (recount.go).
	recounting bool
	epoch      uint16
	// counted is set by the first recount: before it, the counts hold only what was written
	// since the start, so that recount's difference is the store's rows, not a drift.
	counted bool
}

// NewLedger returns an empty ledger that resolves cadences, lanes and routes with pol (read at
// every write, so a reload applies to the rows written after it; the next recount applies it
// to all of them).
func NewLedger(pol func() *policy.Policy) *Ledger {
	return &Ledger{pol: pol, seed: maphash.MakeSeed(), in: newInterner(), rows: map[uint64]packed{}, counts: counts{}}
}

// SetShards makes l a cluster node's ledger: shardOf is the shard of a key (the store's hash),
// owned the shards the node holds now. Demand then counts only the rows of the shards held, so
// that the nodes' demands add up to the farm's with every shard counted once, and a recount
// from a ShardedSource reads only those. Call it before the first write.
func (l *Ledger) SetShards(shardOf func(key []byte) int32, owned func() []int32) {
	l.shardOf, l.owned = shardOf, owned
}

func (l *Ledger) hash(key []byte) uint64 { return maphash.Bytes(l.seed, key) }

func (l *Ledger) shard(key []byte) int32 {
	if l.shardOf == nil {
		return 0
	}
	return l.shardOf(key)
}

// ownedSet is the shards Demand counts: nil for all of them (outside a cluster).
func (l *Ledger) ownedSet() map[int32]bool {
	if l.owned == nil {
		return nil
	}
	set := map[int32]bool{}
	for _, sh := range l.owned() {
		set[sh] = true
	}
	return set
}

// contribution is what a row of key in shard contributes under pol. storedMs is the target's
// stored interval (the funnel mirrors it into the row; a schedule put does not carry it).
func contribution(pol *policy.Policy, key []byte, shard int32, row store.Row, storedMs int64, sealed bool) entry {
	pr := policy.Row{Key: key, Row: row}
	pr.StoredIntervalMs = storedMs
	kr := pol.Resolve(key)
	e := entry{bucket: bucket{lane: policy.LaneOf(&pr), submitted: row.Submitted, route: kr.Name, shard: shard}, storedMs: storedMs, sealed: sealed}
	if !sealed {
		e.cadenceMs, _ = pol.CadenceOf(&pr, kr)
	}
	return e
}

// Put records that key's schedule row is now row. tgt is the target the write carried, nil if
// it carried none: then the stored interval and the sealed state are the ones last seen for
// the key (a schedule put never changes them; the funnel carries the stored interval over).
func (l *Ledger) Put(key []byte, row store.Row, tgt *store.Target) {
	h := l.hash(key)
	pol := l.pol()
	l.mu.Lock()
	defer l.mu.Unlock()
	oldp, had := l.rows[h]
	had = had && !oldp.gone
	var old entry
	storedMs, sealed := row.StoredIntervalMs, false
	if had {
		old = l.in.unpack(oldp)
		storedMs, sealed = old.storedMs, old.sealed
	}
	if tgt != nil {
		storedMs, sealed = tgt.StoredIntervalMs, tgt.Terminal != store.TerminalNone
	}
	e := contribution(pol, key, l.shard(key), row, storedMs, sealed)
	if had {
		l.counts.add(old, -1)
	}
	l.counts.add(e, 1)
	p := l.in.pack(e)
	p.epoch = l.epoch
	l.rows[h] = p
}

// Delete records that key has no row any more.
func (l *Ledger) Delete(key []byte) {
	h := l.hash(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	old, had := l.rows[h]
	if had && !old.gone {
		l.counts.add(l.in.unpack(old), -1)
	}
	if l.recounting {
		// A tombstone, so that the recount does not bring back the row it may still read.
		l.rows[h] = packed{epoch: l.epoch, gone: true}
		return
	}
	delete(l.rows, h)
}

// Demand is a snapshot of the ledger: renders per second the schedule asks for.
type Demand struct {
	Rows  int64 // rows with demand (sealed rows and rows without a cadence are not counted)
	Total float64
	// ByLane and ByRoute are renders per second; ByRoute's "" is the rows no route matches.
	ByLane  map[string]float64
	ByRoute map[string]float64
	// Classes is the same demand split by lane, route and submitted fact: what Project needs.
	Classes []Class
}

// Class is the demand of one lane, route and submitted fact.
type Class struct {
	Lane      policy.Lane
	Route     string
	Submitted bool
	Rows      int64
	PerSecond float64
}

// Demand returns the current demand: of the shards the node holds, in a cluster (SetShards).
func (l *Ledger) Demand() Demand {
	owned := l.ownedSet()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts.demand(owned)
}

// demand sums c over the shards of owned (every shard when owned is nil). Counts of one class
// are merged over its shards before any division, so the figure is the same however the rows
// are spread over shards.
func (c counts) demand(owned map[int32]bool) Demand {
	merged := map[class]map[int64]int64{}
	for b, m := range c {
		if owned != nil && !owned[b.shard] {
			continue
		}
		k := class{lane: b.lane, submitted: b.submitted, route: b.route}
		mm := merged[k]
		if mm == nil {
			mm = map[int64]int64{}
			merged[k] = mm
		}
		for cad, n := range m {
			mm[cad] += n
		}
	}
	d := Demand{ByLane: map[string]float64{}, ByRoute: map[string]float64{}}
	for l := range policy.NumLanes {
		d.ByLane[l.String()] = 0
	}
	for b, m := range merged {
		cl := Class{Lane: b.lane, Route: b.route, Submitted: b.submitted}
		// Sum in ascending cadence so that the float result does not depend on map order.
		cads := make([]int64, 0, len(m))
		for cad := range m {
			cads = append(cads, cad)
		}
		sort.Slice(cads, func(i, j int) bool { return cads[i] < cads[j] })
		for _, cad := range cads {
			cl.Rows += m[cad]
			cl.PerSecond += float64(m[cad]) * 1000 / float64(cad)
		}
		d.Rows += cl.Rows
		d.Total += cl.PerSecond
		d.ByLane[b.lane.String()] += cl.PerSecond
		d.ByRoute[b.route] += cl.PerSecond
		d.Classes = append(d.Classes, cl)
	}
	sort.Slice(d.Classes, func(i, j int) bool {
		a, b := d.Classes[i], d.Classes[j]
		if a.Lane != b.Lane {
			return a.Lane < b.Lane
		}
		if a.Route != b.Route {
			return a.Route < b.Route
		}
		return !a.Submitted && b.Submitted
	})
	return d
}
