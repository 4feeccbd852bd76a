package intake

import (
	"sync"

	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/store"
)

// servedStale is what one observation of a page's content says of the requests served since
// the previous one: how many, and how many of them were (expectedly) stale.
type servedStale struct {
	served, stale float64
}

// servedStaleOf measures an observation of key's page: the requests served over it, and the
// stale ones (staleServed, placing a change with the estimate after the observation).
func servedStaleOf(set *Settings, tu *freshness.Tuning, key []byte, cadenceMs int64, f *store.Freshness, o observed, now int64) servedStale {
	if !(o.served > 0) {
		return servedStale{}
	}
	lambda := historyOf(f).Rate(changePrior(set, tu, key, cadenceMs))
	return servedStale{served: o.served, stale: staleServed(o, lambda)}
}

// StaleMeter is worker 0's measure of the share of crawler requests served stale: the
// requests served between two observations of their page's content (a render or a 304), and
// of those the ones served after the content had changed (none when it had not). A request is
// counted once the observation after it is applied, so the share lags by about a cadence, and
// requests for pages never observed again are not counted.
type StaleMeter struct {
	mu            sync.Mutex
	served, stale float64
}

// Add counts served requests, stale of them stale.
func (m *StaleMeter) Add(served, stale float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.served += served
	m.stale += stale
}

// Totals returns the requests counted since worker 0 started, and the stale ones.
func (m *StaleMeter) Totals() (served, stale float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.served, m.stale
}
