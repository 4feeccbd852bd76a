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

// StretchFor is route's ceiling ÷ its interval: at least 1.
func (t *Tuning) StretchFor(route string) float64 {
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
