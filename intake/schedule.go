package intake

import (
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Scheduling for freshness (queue.policy: freshness). A rendered page is due again once
// rendering it would prevent freshness.threshold stale serves: the time τ* at which its
// marginal value h(τ) (freshness.Marginal, of its estimated change rate λ and request rate μ)
// reaches the threshold ν, within its route's bounds (min_interval, and its cadence as the
// maximum). That is Azar et al.'s optimal rule with ν as the multiplier: a page is rendered
// when its h crosses ν.
//
// The decision is expressed as a due time, and only as one: the row keeps its cadence, its
// lanes and its class, and the sweep, the class index, the selector, politeness and the floor
// are the same as under ready. So rows of one class still order by due time (the property the
// class merge relies on), the number of classes is ready's (the lane flags × the cadence
// buckets; nothing of λ or μ enters a class), and among the rows due the sweep ranks by
// lateness ÷ cadence as under ready. A page is never less urgent than under ready: its due time
// is at most one cadence after its render, so its lateness is at least ready's. Putting
// quantised λ and μ in the class instead would have ranked the due rows by h itself, at the
// price of classes multiplied by the buckets of two rates.

// FreshParts are the parts of one freshness decision, as GET /v1/targets explains them.
type FreshParts struct {
	ChangesPerHour  float64 // λ̂: the estimated change rate (the estimator under the route's prior)
	RequestsPerHour float64 // μ̂: the decayed request rate, or the route's prior
	Threshold       float64 // ν: freshness.threshold
	MinIntervalMs   int64   // the route's min_interval (or cadence ÷ 16)
	MaxIntervalMs   int64   // the cadence: the most time between two renders
	CrossMs         int64   // τ*: when h reaches ν after a render; 0 = not within MaxIntervalMs
	IntervalMs      int64   // the time from a render to the next due: τ* within the bounds
}

// changePrior is the estimator's prior for key: its route's change_interval (else its
// cadence) as freshness.prior_weight pseudo-renders that far apart (at most a cadence), the
// spacing at which a few renders can tell that rate (renders a cadence apart could not tell a
// page changing hourly from one changing every few hours: both changed at every render).
func changePrior(set *Settings, key []byte, cadenceMs int64) freshness.Prior {
	changeMs := cadenceMs
	if rt, ok := set.route(key); ok && rt.ChangeInterval > 0 {
		changeMs = rt.ChangeInterval.Milliseconds()
	}
	changeMs = max(changeMs, 1)
	return freshness.Prior{RatePerHour: 3_600_000 / float64(changeMs),
		Weight: set.Freshness.PriorWeight, IntervalMs: min(changeMs, cadenceMs)}
}

// freshPartsOf decides when a page of key last observed with f is due again, at now.
func freshPartsOf(set *Settings, key []byte, cadenceMs int64, f *store.Freshness, now int64) FreshParts {
	p := FreshParts{Threshold: set.Freshness.Threshold, MaxIntervalMs: cadenceMs,
		MinIntervalMs: cadenceMs / set.Freshness.MinIntervalDiv}
	if rt, ok := set.route(key); ok && rt.MinInterval > 0 {
		p.MinIntervalMs = min(rt.MinInterval.Milliseconds(), cadenceMs)
	}
	p.ChangesPerHour = historyOf(f).Rate(changePrior(set, key, cadenceMs))
	p.RequestsPerHour = RequestRate(set, key, f, now)
	p.CrossMs = crossing(p.ChangesPerHour, p.RequestsPerHour, p.Threshold, cadenceMs)
	p.IntervalMs = cadenceMs
	if p.CrossMs > 0 {
		p.IntervalMs = min(max(p.CrossMs, p.MinIntervalMs), cadenceMs)
	}
	return p
}

// crossing is the time τ ≤ maxMs at which freshness.Marginal(λ, μ, τ) first reaches nu, or 0
// when it does not by maxMs. h grows from 0 towards μ/λ, monotonically, so a bisection finds
// it to the millisecond.
func crossing(lambda, mu, nu float64, maxMs int64) int64 {
	if maxMs <= 0 || freshness.Marginal(lambda, mu, maxMs) < nu {
		return 0
	}
	lo, hi := int64(0), maxMs
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if freshness.Marginal(lambda, mu, mid) >= nu {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// explainFreshness is the freshness part of GET /v1/targets' explanation.
func explainFreshness(set *Settings, key []byte, cadenceMs int64, f *store.Freshness, now int64) *wire.Freshness {
	p := freshPartsOf(set, key, cadenceMs, f, now)
	ex := &wire.Freshness{Policy: set.Freshness.Policy,
		Changed: f.Changed, ChangedHours: f.ChangedHours, UnchangedHours: f.UnchangedHours, Conditional: f.Conditional,
		ChangesPerHour: p.ChangesPerHour, RequestsPerHour: p.RequestsPerHour, RequestsPrior: f.RequestsAtMs == 0,
		Threshold: p.Threshold, MinIntervalSec: float64(p.MinIntervalMs) / 1000, CrossingSec: float64(p.CrossMs) / 1000,
		IntervalSec: float64(p.IntervalMs) / 1000, ETag: f.ETag, LastModified: f.LastModified}
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
