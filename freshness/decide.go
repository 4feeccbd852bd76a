package freshness

// Scheduling for freshness (queue.policy: freshness). A rendered page is due again once
// rendering it would prevent freshness.threshold stale serves: the time τ* at which its
// marginal value h(τ) (freshness.Marginal, of its estimated change rate λ and request rate μ)
// reaches the threshold ν, within its route's bounds (min_interval, and a ceiling). That is
// Azar et al.'s optimal rule with ν as the multiplier: a page is rendered when its h crosses ν.
// ν and the ceiling are worker 0's tuning when it has one (apply.ApplierDeps.Tuning: the water-filling
// multiplier at the measured capacity, and ready's projected longest interval of the route,
// capacity.TuneFreshness); else freshness.threshold and the cadence.
//
// The decision is expressed as a due time and a rank interval: the row keeps its cadence and
// its lanes, and the sweep, the class index, the selector, politeness and the floor are the
// same as under ready. Among the rows due the sweep ranks by lateness ÷ rank interval instead
// of lateness ÷ cadence: the rank interval is ν ÷ h′(τ*) (freshness.RankInterval), so a row
// late by d ranks by how much its marginal value has grown past ν, about h′(τ*)·d, and the
// pages worth more are rendered first when the farm is behind, as the optimal policy renders
// a backlog. A row filed at its ceiling ranks by lateness ÷ the route's interval (what the
// ceiling stretches), as ready ranks by lateness ÷ cadence, so that a stretched ceiling does not
// also slow the row's climb past the rows ranked by value. Rows of one rank interval order by
// due time at every now (the property the class merge relies on); the classes are the rank
// intervals' logarithmic buckets. A page's due time is at most its ceiling after its render:
// one cadence while capacity suffices, what ready is projected to stretch its route to under
// scarcity. Putting quantised λ and μ in the class instead would have ranked the due rows by h
// itself, at the price of classes multiplied by the buckets of two rates; the linear rank is
// one number a row carries.

// Inputs is what one decision of a key reads of its route and of the configuration, resolved
// once for the key (by the service that decides: worker 0's applier, demand flush and explain).
type Inputs struct {
	Route            string  // the key's route name ("": none), whose tuning stretch and pooled rate apply
	RouteIntervalMs  int64   // the route's interval (routes[].interval), else 0
	ChangeIntervalMs int64   // routes[].change_interval; 0: none
	MinIntervalMs    int64   // routes[].min_interval; 0: the cadence ÷ MinIntervalDiv
	MinIntervalDiv   int64   // a route without min_interval renders at most every cadence ÷ this
	Threshold        float64 // freshness.threshold: ν without a tuning
	PriorWeight      float64 // freshness.prior_weight
	SweepIntervalMs  int64   // queue.ready.sweep_interval
	MaxCadenceMs     int64   // the longest cadence a row may have (policy.MaxCadence)
}

// Parts are the parts of one freshness decision, as GET /v1/targets explains them.
type Parts struct {
	ChangesPerHour  float64 // λ̂: the estimated change rate (the estimator under the route's prior)
	RequestsPerHour float64 // μ̂: the decayed request rate, or the route's prior
	Threshold       float64 // ν: the tuning's, else freshness.threshold
	MinIntervalMs   int64   // the route's min_interval (or cadence ÷ 16)
	MaxIntervalMs   int64   // the ceiling: CeilingBaseMs, or the tuning's stretch of it
	// CeilingBaseMs is what the ceiling stretches (CeilingBase): the route's interval, else
	// the row's cadence.
	CeilingBaseMs int64
	// Still is whether the page was seen unchanged at every render over at least its ceiling
	// base (freshness.Still), so that its ceiling is a still page's (StillStretchFor); only
	// with a tuning.
	Still      bool
	CrossMs    int64 // τ*: when h reaches ν after a render; 0 = not within MaxIntervalMs
	IntervalMs int64 // the time from a render to the next due: τ* within the bounds
	// RankIntervalMs is what the sweep divides the row's lateness by once due
	// (freshness.RankInterval): ν ÷ h′ at IntervalMs, CeilingBaseMs for a row filed at its
	// ceiling, 0 (its cadence) without a threshold.
	RankIntervalMs int64
}

// ChangePrior is the estimator's prior for a key (PriorAt, freshness.prior_weight
// pseudo-renders): at its route's change_interval when the route sets one; else at the change
// rate the tuning pooled from the route's pages (tu, worker 0's: what the route's pages were
// seen to do; 0 when they never changed); else at one change a cadence, the operator's guess.
func ChangePrior(in *Inputs, tu *Tuning, cadenceMs int64) Prior {
	var rate float64
	if in.ChangeIntervalMs > 0 {
		rate = 3_600_000 / float64(max(in.ChangeIntervalMs, 1))
	} else {
		var route string
		if tu != nil { // a route's pooled rate is only a tuning's
			route = in.Route
		}
		rate = tu.PriorRateFor(route, cadenceMs)
	}
	return PriorAt(rate, cadenceMs, in.PriorWeight)
}

// CeilingBase is the interval a row's ceiling stretches: its route's interval
// (routes[].interval), else its cadence. The route's interval is the guarantee an operator
// reads; a row's cadence is its demand rung's, shorter for pages in demand, and those are
// rendered at their crossings anyway: a ceiling at the rung would spend renders on keeping a
// popular page's rung that its value does not ask for (about 4 % of the capacity on the
// simulator's catalog). Never below the cadence.
func CeilingBase(in *Inputs, cadenceMs int64) int64 {
	return max(cadenceMs, in.RouteIntervalMs)
}

// Still reports whether history h shows a page seen unchanged at every render over at least
// baseMs (its ceiling base, the route's interval): no change observed, and the renders that
// found none span that long. Such a page's ceiling under scarcity is its route's stretched by
// StillStretchFactor (Tuning.CeilingStretch). One render that finds it changed ends it.
func Still(h History, baseMs int64) bool {
	return baseMs > 0 && !(clean(h.Changed) > 0) && clean(h.UnchangedHours)*msPerHour >= float64(baseMs)
}

// CeilingStretch is the factor a page's ceiling base is stretched by under tuning t: its
// route's stretch (StretchFor), or for a still page (Still) StillStretchFor. 1 without a
// tuning. The capacity tuning's water-filling bounds each page by the same ceiling.
func (t *Tuning) CeilingStretch(route string, still bool) float64 {
	if still {
		return t.StillStretchFor(route)
	}
	return t.StretchFor(route)
}

// Decide decides when a page last observed with history h, requested requestsPerHour, is due
// again after its render. The ceiling is the route's interval (CeilingBase); with a tuning
// (worker 0's, following capacity: capacity.TuneFreshness) its threshold replaces
// freshness.threshold and the ceiling is stretched by its route's stretch, or for a page seen
// still (Still) by StillStretchFor; without one (nil: none computed yet) the configuration's
// threshold and the route's interval apply.
func Decide(in *Inputs, tu *Tuning, cadenceMs int64, h History, requestsPerHour float64) Parts {
	base := CeilingBase(in, cadenceMs)
	p := Parts{Threshold: in.Threshold, MaxIntervalMs: base, CeilingBaseMs: base,
		MinIntervalMs: cadenceMs / in.MinIntervalDiv}
	if in.MinIntervalMs > 0 {
		p.MinIntervalMs = min(in.MinIntervalMs, cadenceMs)
	}
	if tu != nil {
		p.Threshold = tu.Nu
		p.Still = Still(h, base)
		p.MaxIntervalMs = min(int64(float64(base)*tu.CeilingStretch(in.Route, p.Still)), in.MaxCadenceMs)
	}
	p.ChangesPerHour = h.Rate(ChangePrior(in, tu, cadenceMs))
	p.RequestsPerHour = requestsPerHour
	p.CrossMs, p.IntervalMs = DueAfter(p.ChangesPerHour, p.RequestsPerHour, p.Threshold, p.MinIntervalMs, p.MaxIntervalMs, in.SweepIntervalMs)
	p.RankIntervalMs = RankInterval(p.ChangesPerHour, p.RequestsPerHour, p.Threshold, p.CrossMs, p.IntervalMs, p.CeilingBaseMs, p.MaxIntervalMs)
	return p
}

// StaleServesSince is the expected number of requests served stale since the last observation
// (StaleServes): what a render now would stop.
func (p Parts) StaleServesSince(sinceMs int64) float64 {
	return StaleServes(p.ChangesPerHour, p.RequestsPerHour, sinceMs)
}

// MarginalAt is the page's marginal value of a render sinceMs after its last observation.
func (p Parts) MarginalAt(sinceMs int64) float64 {
	return Marginal(p.ChangesPerHour, p.RequestsPerHour, sinceMs)
}

// RefiledDue is the due time of a row refiled under a shorter cadence bound (a reload that
// shortened its route's interval): a row filed due at dueMs carrying carriedMs is due at most
// one bound after the time its due time was filed from, and after its last render
// (lastRenderMs; 0: none), but never before minDueMs (the floor, or now if earlier):
//
//	due' = max(min(due, due − carried + bound, lastRender + bound), minDue)
//
// A due time already past stays past, so the row ranks by how late it really is.
func RefiledDue(dueMs, carriedMs, boundMs, lastRenderMs, minDueMs int64) int64 {
	due := min(dueMs, dueMs-carriedMs+boundMs)
	if lastRenderMs > 0 {
		due = min(due, lastRenderMs+boundMs)
	}
	return max(due, minDueMs)
}
