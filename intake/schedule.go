package intake

import (
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Scheduling for freshness (queue.policy: freshness). A rendered page is due again once
// rendering it would prevent freshness.threshold stale serves: the time τ* at which its
// marginal value h(τ) (freshness.Marginal, of its estimated change rate λ and request rate μ)
// reaches the threshold ν, within its route's bounds (min_interval, and a ceiling). That is
// Azar et al.'s optimal rule with ν as the multiplier: a page is rendered when its h crosses ν.
// ν and the ceiling are worker 0's tuning when it has one (ApplierDeps.Tuning: the water-filling
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

// FreshParts are the parts of one freshness decision, as GET /v1/targets explains them.
type FreshParts struct {
	ChangesPerHour  float64 // λ̂: the estimated change rate (the estimator under the route's prior)
	RequestsPerHour float64 // μ̂: the decayed request rate, or the route's prior
	Threshold       float64 // ν: the tuning's, else freshness.threshold
	MinIntervalMs   int64   // the route's min_interval (or cadence ÷ 16)
	MaxIntervalMs   int64   // the ceiling: CeilingBaseMs, or the tuning's stretch of it
	// CeilingBaseMs is what the ceiling stretches (ceilingBaseMs): the route's interval, else
	// the row's cadence.
	CeilingBaseMs int64
	CrossMs       int64 // τ*: when h reaches ν after a render; 0 = not within MaxIntervalMs
	IntervalMs    int64 // the time from a render to the next due: τ* within the bounds
	// RankIntervalMs is what the sweep divides the row's lateness by once due
	// (freshness.RankInterval): ν ÷ h′ at IntervalMs, CeilingBaseMs for a row filed at its
	// ceiling, 0 (its cadence) without a threshold.
	RankIntervalMs int64
}

// ChangePrior is the estimator's prior for key (freshness.PriorAt, freshness.prior_weight
// pseudo-renders): at its route's change_interval when the route sets one; else at the change
// rate the tuning pooled from the route's pages (tu, worker 0's: what the route's pages were
// seen to do; 0 when they never changed); else at one change a cadence, the operator's guess.
func ChangePrior(set *Settings, tu *freshness.Tuning, key []byte, cadenceMs int64) freshness.Prior {
	var rate float64
	if rt, ok := set.Route(key); ok && rt.ChangeInterval > 0 {
		rate = 3_600_000 / float64(max(rt.ChangeInterval.Milliseconds(), 1))
	} else {
		var route string
		if tu != nil { // the route is looked up only when a tuning may have pooled its rate
			route, _ = set.Policy.RouteOf(key)
		}
		rate = tu.PriorRateFor(route, cadenceMs)
	}
	return freshness.PriorAt(rate, cadenceMs, set.Freshness.PriorWeight)
}

// ceilingBaseMs is the interval a row's ceiling stretches: its route's interval
// (routes[].interval), else its cadence. The route's interval is the guarantee an operator
// reads; a row's cadence is its demand rung's, shorter for pages in demand, and those are
// rendered at their crossings anyway: a ceiling at the rung would spend renders on keeping a
// popular page's rung that its value does not ask for (about 4 % of the capacity on the
// simulator's catalog). Never below the cadence.
func ceilingBaseMs(set *Settings, key []byte, cadenceMs int64) int64 {
	return max(cadenceMs, set.Policy.RouteInterval(key))
}

// FreshPartsOf decides when a page of key last observed with f is due again, at now. The
// ceiling is the route's interval (ceilingBaseMs); with a tuning (worker 0's, following
// capacity: capacity.TuneFreshness) its threshold replaces freshness.threshold and the ceiling
// is stretched by its route's stretch; without one (nil: none computed yet) the
// configuration's threshold and the route's interval apply.
func FreshPartsOf(set *Settings, tu *freshness.Tuning, key []byte, cadenceMs int64, f *store.Freshness, now int64) FreshParts {
	base := ceilingBaseMs(set, key, cadenceMs)
	p := FreshParts{Threshold: set.Freshness.Threshold, MaxIntervalMs: base, CeilingBaseMs: base,
		MinIntervalMs: cadenceMs / set.Freshness.MinIntervalDiv}
	if rt, ok := set.Route(key); ok && rt.MinInterval > 0 {
		p.MinIntervalMs = min(rt.MinInterval.Milliseconds(), cadenceMs)
	}
	if tu != nil {
		route, _ := set.Policy.RouteOf(key)
		p.Threshold = tu.Nu
		p.MaxIntervalMs = min(int64(float64(base)*tu.StretchFor(route)), policy.MaxCadence.Milliseconds())
	}
	p.ChangesPerHour = HistoryOf(f).Rate(ChangePrior(set, tu, key, cadenceMs))
	p.RequestsPerHour = RequestRate(set, key, f, now)
	p.CrossMs, p.IntervalMs = freshness.DueAfter(p.ChangesPerHour, p.RequestsPerHour, p.Threshold, p.MinIntervalMs, p.MaxIntervalMs, set.SweepInterval.Milliseconds())
	p.RankIntervalMs = freshness.RankInterval(p.ChangesPerHour, p.RequestsPerHour, p.Threshold, p.CrossMs, p.IntervalMs, p.CeilingBaseMs)
	return p
}

// schedule is the schedule put of a row the freshness decision p files due at dueAtMs: its
// due time and its rank interval.
func (p FreshParts) Schedule(key []byte, dueAtMs int64, submitted bool, cadenceMs int64, lanes store.Lanes) (store.Schedule, error) {
	sch, err := store.NewSchedule(key, dueAtMs, submitted, cadenceMs, lanes)
	if err != nil {
		return store.Schedule{}, err
	}
	return sch.WithRankInterval(p.RankIntervalMs)
}

// keepRank gives sch the rank interval of row, the row it replaces, when sch files the same due
// time: a rank interval belongs to the decision that filed its due time (freshness's, in the
// Applier or the demand flush), and a write that only re-files that due time (a key's move, a
// wait, a target's update) keeps both. A write that files a due time of its own files none.
func keepRank(sch store.Schedule, row store.Row) (store.Schedule, error) {
	if sch.DueAtMs() != row.DueAtMs {
		return sch, nil
	}
	return sch.WithRankInterval(row.RankIntervalMs)
}

// FreshPlan is what worker 0's tuning reads of a row under queue.policy freshness: its route,
// its cadence and its decision's parts (its estimated rates and its floor), at now. ok is
// false for a row the tuning leaves out: sealed, failing or never rendered (their due times
// are ready's), or without a cadence.
func FreshPlan(set *Settings, tu *freshness.Tuning, key []byte, row store.Row, t *store.Target, now int64) (route string, cadenceMs int64, p FreshParts, ok bool) {
	if t == nil || t.Terminal != store.TerminalNone || row.Failing || row.NeverRendered {
		return "", 0, FreshParts{}, false
	}
	pr := policy.Row{Key: key, Row: row}
	pr.StoredIntervalMs = t.StoredIntervalMs // the target's, as the Applier decides
	cadenceMs, _ = set.Policy.Cadence(&pr)
	if cadenceMs <= 0 {
		return "", 0, FreshParts{}, false
	}
	route, _ = set.Policy.RouteOf(key)
	return route, cadenceMs, FreshPartsOf(set, tu, key, cadenceMs, &t.Fresh, now), true
}

// explainFreshness is the freshness part of GET /v1/targets' explanation.
func explainFreshness(set *Settings, tu *freshness.Tuning, key []byte, cadenceMs int64, f *store.Freshness, now int64) *wire.Freshness {
	p := FreshPartsOf(set, tu, key, cadenceMs, f, now)
	ex := &wire.Freshness{Policy: set.Freshness.Policy,
		Changed: f.Changed, ChangedHours: f.ChangedHours, UnchangedHours: f.UnchangedHours, Conditional: f.Conditional,
		ChangesPerHour: p.ChangesPerHour, RequestsPerHour: p.RequestsPerHour, RequestsPrior: f.RequestsAtMs == 0,
		Threshold: p.Threshold, MinIntervalSec: float64(p.MinIntervalMs) / 1000, CrossingSec: float64(p.CrossMs) / 1000,
		IntervalSec: float64(p.IntervalMs) / 1000, RankIntervalSec: float64(p.RankIntervalMs) / 1000,
		ETag: f.ETag, LastModified: f.LastModified}
	if p.ChangesPerHour > 0 {
		ex.ChangeIntervalSec = 3600 / p.ChangesPerHour
	}
	if f.DigestAtMs > 0 {
		since := max(now-f.DigestAtMs, 0)
		ex.ObservedAt = ms(f.DigestAtMs)
		ex.SinceSec = float64(since) / 1000
		ex.ExpectedStale = p.stalePart(since)
		ex.Marginal = p.marginalAt(since)
	}
	return ex
}

// stalePart is the expected number of requests served stale since the last observation
// (freshness.StaleServes): what a render now would stop.
func (p FreshParts) stalePart(sinceMs int64) float64 {
	return freshness.StaleServes(p.ChangesPerHour, p.RequestsPerHour, sinceMs)
}

// marginalAt is the page's marginal value of a render sinceMs after its last observation.
func (p FreshParts) marginalAt(sinceMs int64) float64 {
	return freshness.Marginal(p.ChangesPerHour, p.RequestsPerHour, sinceMs)
}

// HistoryOf and SetHistory convert between the store's numbers and the estimator's.
func HistoryOf(f *store.Freshness) freshness.History {
	return freshness.History{Changed: f.Changed, ChangedHours: f.ChangedHours, UnchangedHours: f.UnchangedHours}
}

func SetHistory(f *store.Freshness, h freshness.History) {
	f.Changed, f.ChangedHours, f.UnchangedHours = h.Changed, h.ChangedHours, h.UnchangedHours
}
