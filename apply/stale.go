package apply

import (
	"sync"

	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/store"
)

// servedStale is what one observation of a page's content says of the requests served since
// the previous one: how many, and how many of them were (expectedly) stale.
type servedStale struct {
	served, stale float64
}

// servedStaleOf measures an observation of the page of a key whose route is kr: the requests served over it, and the
// stale ones (staleServed, placing a change with the estimate after the observation).
func servedStaleOf(set *intake.Settings, tu *freshness.Tuning, kr intake.KeyRoute, cadenceMs int64, f *store.Freshness, o observed, now int64) servedStale {
	if !(o.served > 0) {
		return servedStale{}
	}
	lambda := intake.HistoryOf(f).Rate(intake.ChangePrior(set, tu, kr, cadenceMs))
	return servedStale{served: o.served, stale: staleServed(o, lambda)}
}

// StaleMeter is worker 0's measure of the share of crawler requests served stale: the
// requests served between two observations of their page's content (a render or a 304), and
// of those the ones served after the content had changed (none when it had not). A request is
// counted once the observation after it is applied, so the share lags by about a cadence, and
// requests for pages never observed again are not counted.
//
// It keeps the totals since worker 0 started and, when Now is set, the last StaleWindow of
// them (by when they were counted, in minute buckets): a farm's share since its start mixes
// its first pass with its steady state, and an operator changing a setting wants to see what
// the last quarter hour did.
type StaleMeter struct {
	// Now is the clock the window is kept on; nil keeps the totals only.
	Now func() int64

	mu            sync.Mutex
	served, stale float64
	ring          [staleBuckets]staleBucket
}

// StaleWindow is the window of StaleMeter.Window: a quarter of an hour, as the capacity meter's.
const StaleWindow = 15 * 60 * 1000 // ms

const (
	staleBucketMs = 60 * 1000
	staleBuckets  = StaleWindow / staleBucketMs
)

type staleBucket struct {
	slot          int64 // atMs / staleBucketMs of the requests counted here
	served, stale float64
}

// Add counts served requests, stale of them stale.
func (m *StaleMeter) Add(served, stale float64) {
	var now int64
	if m.Now != nil {
		now = m.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.served += served
	m.stale += stale
	if m.Now == nil {
		return
	}
	slot := now / staleBucketMs
	b := &m.ring[slot%staleBuckets]
	if b.slot != slot {
		*b = staleBucket{slot: slot}
	}
	b.served += served
	b.stale += stale
}

// Totals returns the requests counted since worker 0 started, and the stale ones.
func (m *StaleMeter) Totals() (served, stale float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.served, m.stale
}

// Window returns the requests counted in the last StaleWindow (the current minute and the
// fourteen whole ones before it), and the stale ones; nothing without Now.
func (m *StaleMeter) Window() (served, stale float64) {
	if m.Now == nil {
		return 0, 0
	}
	cur := m.Now() / staleBucketMs
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.ring {
		b := &m.ring[i]
		if b.slot > cur || b.slot <= cur-staleBuckets {
			continue
		}
		served += b.served
		stale += b.stale
	}
	return served, stale
}
