package freshness

import "sync/atomic"

// Tuning is what production files due times with under queue.policy freshness when the
// threshold follows capacity: the threshold Nu; per route ("" for rows no route matches) the
// ceiling as a multiple of the route's interval (a row's cadence when no route matches it;
// Stretch; 1 for a route it does not name); and per
// route the change rate its pages' histories pooled estimate (RouteRate), the prior of a page
// whose own history is short. Worker 0 computes it at the capacity recount
// (capacity.TuneFreshness) and the Applier reads it for every success; a Tuning is never
// changed once published.
type Tuning struct {
	Nu      float64
	Stretch map[string]float64
	// RouteRate is, per route, the change rate (per hour) of its pages' histories pooled
	// (History.Pool, History.Rate with no prior): what a page of the route is expected to do
	// before its own renders tell. A route none of whose pages has an observation is absent.
	RouteRate map[string]float64
}

// RouteRateFor is route's pooled change rate per hour, and whether its pages observed any.
func (t *Tuning) RouteRateFor(route string) (float64, bool) {
	if t == nil {
		return 0, false
	}
	r, ok := t.RouteRate[route]
	return r, ok
}

// PriorRateFor is the change rate per hour a page of route at cadenceMs is expected to have
// before its own renders tell: the route's pooled rate when its pages observed any, else one
// change a cadence (also when t is nil: no tuning yet).
func (t *Tuning) PriorRateFor(route string, cadenceMs int64) float64 {
	if r, ok := t.RouteRateFor(route); ok {
		return r
	}
	return 3_600_000 / float64(max(cadenceMs, 1))
}

// StretchFor is route's ceiling ÷ its interval: at least 1 (also when t is nil).
func (t *Tuning) StretchFor(route string) float64 {
	if t == nil {
		return 1
	}
	if s, ok := t.Stretch[route]; ok && s > 1 {
		return s
	}
	return 1
}

// TuningCell holds the current Tuning for concurrent readers: the one place worker 0's tuning
// and its write path meet. The zero value holds none.
type TuningCell struct{ p atomic.Pointer[Tuning] }

// Load returns the current tuning, or nil when none was stored (or c is nil): then the
// configuration's threshold and the routes' intervals apply.
func (c *TuningCell) Load() *Tuning {
	if c == nil {
		return nil
	}
	return c.p.Load()
}

// Store publishes t; t must not be changed afterwards.
func (c *TuningCell) Store(t *Tuning) { c.p.Store(t) }

// StillStretchFactor is how many times its route's ceiling a still page may wait under
// scarcity (StillStretchFor): a page seen unchanged at every render over at least its route's
// interval (Still). ready renders every page at least once in its route's longest interval,
// the ceiling the other pages keep to, so a page rendered at most once in three of those gets
// at most about a third of the renders ready gives it, and they go to the pages that change.
// Where a route's pages are alike and the farm is behind, ready renders every page once a
// cycle, its longest interval is its mean one, and ceilings at it take the whole capacity: a
// page that never changes keeps its renders unless its ceiling is longer than ready's. A still
// page whose content changes is seen changed at its next render and is no longer still, so a
// change waits at most three of ready's longest intervals to be seen.
const StillStretchFactor = 3

// StillStretchFor is the stretch of a still page of route (Still): StillStretchFactor times the
// route's stretch under scarcity (the route's stretch past 1: ready itself cannot keep the
// route's interval). While the route's stretch is 1 it is 1 too: with capacity for every page
// at its interval, a still page keeps it.
func (t *Tuning) StillStretchFor(route string) float64 {
	s := t.StretchFor(route)
	if s > 1 {
		return s * StillStretchFactor
	}
	return 1
}
