package intake

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// Demand writes crawler requests into their targets' request counters (store.Freshness.Requests,
// a freshness.Counter: a rate on the time scale of the page's own requests, at most
// freshness.request_tau).
// The crawler listener counts requests per key in memory (serve.Demand); every
// freshness.demand_flush worker 0 hands what it counted since to Write, which files it as one
// funnel batch (Modify, a chunk at a time), so demand reaches the rows without a write per
// request, and a hit never waits on a write. Each key is changed under its lock, like every
// read-decide-write of worker 0, and only its target's request counter changes: its row is
// filed again as it was.
type Demand struct {
	d DemandDeps
	// since is when the counts the next Write adds began: the previous Write's time (the
	// Demand's creation before the first). A page counted for the first time takes its rate
	// from its count over that time (freshness.FirstCount).
	since atomic.Int64
}

// DemandDeps are what a Demand needs. Every one is required but Tuning, which only refines a
// due time; each required one carries a guarantee:
//   - Writer: every write passes the sweep's wrapper (sweep.Changes), so that a sweep never
//     publishes a row written after its snapshot;
//   - Locks: the key locks shared with every other read-decide-write of worker 0, so that a
//     flush never lands between a result's decision and its commit.
type DemandDeps struct {
	Store    store.Store // reads
	Writer   Writer
	Locks    *KeyLocks
	Settings func() *Settings
	Now      func() int64
	// Tuning is the Applier's (ApplierDeps.Tuning): a due time brought forward is the one the
	// Applier would file. nil: the configuration's threshold and the cadence.
	Tuning *freshness.TuningCell
}

// NewDemand returns a Demand, or ErrMissingDependency naming a required dependency left out.
func NewDemand(d DemandDeps) (*Demand, error) {
	for _, dep := range []struct {
		name    string
		missing bool
	}{
		{"Store", d.Store == nil},
		{"Writer", d.Writer == nil},
		{"Locks", d.Locks == nil},
		{"Settings", d.Settings == nil},
		{"Now", d.Now == nil},
	} {
		if dep.missing {
			return nil, fmt.Errorf("%w: Demand needs %s", ErrMissingDependency, dep.name)
		}
	}
	dm := &Demand{d: d}
	dm.since.Store(d.Now())
	return dm, nil
}

// demandChunk bounds one Modify of a flush: the keys locked and written at once.
const demandChunk = 1000

// Write adds counts (requests per cache key since the previous flush) to the targets at now.
// Every flush calls it, with no counts too: the time since the previous call is what the
// counts cover, and a page counted for the first time takes its rate over it.
// A key with no row or no target is not a target yet (a miss not filed, a host not rendered):
// its requests are dropped. It returns how many targets it wrote, and the counts it could not
// write because the store failed, for the caller to give back to the next flush.
func (d *Demand) Write(counts map[string]uint32) (written int, left map[string]uint32, err error) {
	keys := make([]string, 0, len(counts))
	for k, n := range counts {
		if n > 0 && len(k) > 0 && len(k) <= store.MaxKeyLen {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	w := d.d.Writer
	from := d.since.Swap(d.d.Now())
	for len(keys) > 0 {
		chunk := keys[:min(demandChunk, len(keys))]
		keys = keys[len(chunk):]
		n, err := d.writeChunk(w, chunk, counts, from)
		written += n
		if err != nil {
			left = make(map[string]uint32, len(chunk)+len(keys))
			for _, k := range append(chunk, keys...) {
				left[k] = counts[k]
			}
			return written, left, fmt.Errorf("intake: writing crawler requests of %d keys: %w", len(left), err)
		}
	}
	return written, nil, nil
}

func (d *Demand) writeChunk(w Writer, keys []string, counts map[string]uint32, from int64) (int, error) {
	bkeys := make([][]byte, len(keys))
	for i, k := range keys {
		bkeys[i] = []byte(k)
	}
	defer d.d.Locks.Lock(bkeys)()
	set, tu := d.d.Settings(), d.d.Tuning.Load()
	tau := set.Freshness.RequestTau.Milliseconds()
	now := d.d.Now()
	head := d.d.Store.HeadMs()
	changes := make([]store.Change, len(keys))
	for i, k := range bkeys {
		n := float64(counts[keys[i]])
		kr := set.Resolve(k)
		changes[i] = store.Change{Key: k, MinDueMs: min(head, now), Decide: func(cur store.Current) (store.Write, bool, error) {
			if !cur.HasRow || !cur.HasTarget || cur.NotOwner || cur.Row.DueAtMs < min(head, now) {
				return store.Write{}, false, nil
			}
			t := cur.Target
			c := countRequests(&t.Fresh, requestPrior(set, kr), from, now, n, tau)
			t.Fresh.Requests, t.Fresh.RequestsAtMs = c.Value, c.AtMs
			t.Fresh.Served += n
			due, rank := demandDue(set, tu, k, kr, cur.Row, &t.Fresh, now)
			sch, err := store.NewSchedule(k, due, cur.Row.Submitted, cur.Row.EffectiveIntervalMs, cur.Row.Lanes)
			if err == nil {
				sch, err = sch.WithRankInterval(rank)
			}
			if err != nil {
				return store.Write{}, false, err
			}
			return store.Write{Schedule: sch, Target: &t}, true, nil
		}}
	}
	applied, err := w.Modify(changes)
	if err != nil {
		// Of a chunk the funnel committed in part (store.PartialWriteError), the retry adds
		// the committed keys' requests again: a few requests counted twice at worst.
		return 0, err
	}
	n := 0
	for _, ok := range applied {
		if ok {
			n++
		}
	}
	return n, nil
}

// countRequests is a target's request counter after n requests counted from from to now (the
// flush's counts began at from). A target never counted before takes its rate from them
// (freshness.FirstCount): its route's prior stands only for pages never asked for, and a new
// site's pages are at their own rates from their first flush, not near the prior for as long
// as the counters remember.
func countRequests(f *store.Freshness, priorPerHour float64, from, now int64, n float64, tauMs int64) freshness.Counter {
	if f.RequestsAtMs == 0 {
		return freshness.FirstCount(from, now, n, priorPerHour, tauMs)
	}
	c := freshness.Counter{Value: f.Requests, AtMs: f.RequestsAtMs}
	c.Add(now, n, tauMs)
	return c
}

// RequestRate is a target's request rate per hour at now under set: its counter's, or its
// route's (kr, Settings.Resolve) prior when it was never counted.
func RequestRate(set *Settings, kr KeyRoute, f *store.Freshness, now int64) float64 {
	tau := set.Freshness.RequestTau.Milliseconds()
	if f.RequestsAtMs == 0 {
		return requestPrior(set, kr)
	}
	return freshness.Counter{Value: f.Requests, AtMs: f.RequestsAtMs}.PerHour(now, tau)
}

// requestPrior is the request rate of a page of the route kr never requested.
func requestPrior(set *Settings, kr KeyRoute) float64 {
	if rt := kr.Route; rt != nil && rt.Requests > 0 {
		return rt.Requests
	}
	return set.Freshness.Requests
}

// demandDue is the due time and rank interval of a row whose request rate just changed:
// under queue.policy freshness, a page now asked for more is due sooner (its last observation
// plus the interval its new rate gives, and at once when that has passed), with the rank
// interval of that decision, never later than it was; otherwise (and for a row rushed,
// failing, never rendered or never observed, as under ready) it keeps both.
func demandDue(set *Settings, tu *freshness.Tuning, key []byte, kr KeyRoute, row store.Row, f *store.Freshness, now int64) (dueAtMs, rankMs int64) {
	pol := set.Policy
	if !set.Freshness.On || row.Urgent || row.Failing || row.NeverRendered || f.DigestAtMs <= 0 {
		return row.DueAtMs, row.RankIntervalMs
	}
	pr := policy.Row{Key: key, Row: row}
	cadence, _ := pol.CadenceOf(&pr, kr.Policy)
	p := FreshPartsOf(set, tu, kr, cadence, f, now)
	if due := max(f.DigestAtMs+p.IntervalMs, now); due < row.DueAtMs {
		return due, p.RankIntervalMs
	}
	return row.DueAtMs, row.RankIntervalMs
}
