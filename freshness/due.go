package freshness

import "math"

// Crossing is the time τ ≤ maxMs at which Marginal(λ, μ, τ) first reaches nu, or 0 when it
// does not by maxMs. h grows from 0 towards μ/λ, monotonically, so a bisection finds it to the
// millisecond.
func Crossing(lambda, mu, nu float64, maxMs int64) int64 {
	if maxMs <= 0 || Marginal(lambda, mu, maxMs) < nu {
		return 0
	}
	lo, hi := int64(0), maxMs
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if Marginal(lambda, mu, mid) >= nu {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// DueAfter is production's freshness filing (queue.policy freshness): the time from a render
// to the page's next due time. The page is due when its marginal value reaches the threshold
// nu (Crossing), never sooner than minMs after the render (the floor, min_interval) and never
// later than maxMs (the ceiling); a page whose h does not reach nu by the ceiling is due leadMs
// before it (the sweep interval: the time between two publishes of the ready set), so that the
// last sweep before the ceiling publishes it rather than the first after, and never before its
// floor. crossMs is the crossing itself (0: not within maxMs), as GET /v1/targets explains it.
func DueAfter(lambda, mu, nu float64, minMs, maxMs, leadMs int64) (crossMs, intervalMs int64) {
	crossMs = Crossing(lambda, mu, nu, maxMs)
	if crossMs > 0 {
		return crossMs, min(max(crossMs, minMs), maxMs)
	}
	return 0, max(maxMs-max(leadMs, 0), min(minMs, maxMs))
}

// MaxThreshold is the threshold that makes every page wait for its ceiling: what Threshold
// returns when the ceilings alone ask for more renders than the budget. It is finite so that it
// survives JSON (GET /v1/targets' explanation) and far above any page's μ/λ.
const MaxThreshold = 1e12

// ThresholdTolerance is how close Threshold gets to the multiplier, relative: a threshold
// 0.1 % off asks for renders within a fraction of that of the budget, far inside the noise of
// a measured capacity, and it takes a third of the steps of Optimal's bisection.
const ThresholdTolerance = 1e-3

// Threshold is the multiplier ν at which the pages, each rendered when its marginal value
// reaches ν within its bounds, ask for budgetPerHour renders: the Lagrange multiplier of the
// water-filling Optimal does (the same rates, found to ThresholdTolerance). It is
// MaxThreshold when the ceilings (MinPerHour) alone ask for the budget or more, and 0 when
// every page at its floor (MaxPerHour) fits within it. A page with neither change nor requests
// asks only for its ceiling's rate.
func Threshold(pages []Page, budgetPerHour float64) float64 {
	budget, sumMin, sumMax, unbounded := clean(budgetPerHour), 0.0, 0.0, false
	for _, p := range pages {
		sumMin += clean(p.MinPerHour)
		if p.MaxPerHour > 0 {
			sumMax += p.MaxPerHour
		} else {
			unbounded = true
		}
	}
	switch {
	case sumMin >= budget:
		return MaxThreshold
	case !unbounded && sumMax <= budget:
		return 0
	}
	asked := func(nu float64) float64 {
		total := 0.0
		for _, p := range pages {
			total += rateAt(p, nu)
		}
		return total
	}
	lo, hi := math.Log(1e-15), math.Log(MaxThreshold) // asked(e^lo) > budget > asked(e^hi)
	for hi-lo > ThresholdTolerance {
		mid := (lo + hi) / 2
		if asked(math.Exp(mid)) > budget {
			lo = mid
		} else {
			hi = mid
		}
	}
	return math.Exp(hi) // the side that does not overspend
}

// Slope is how fast a page's marginal value grows sinceMs after its last render, per hour:
// h′(t) = μλt·e^{−λt}. It rises from 0, peaks at t = 1/λ and falls again as h saturates
// towards μ/λ.
func Slope(lambda, mu float64, sinceMs int64) float64 {
	l, m, t := clean(lambda), clean(mu), hours(sinceMs)
	if l == 0 || m == 0 || t == 0 {
		return 0
	}
	return clean(m * l * t * math.Exp(-l*t))
}

// RankInterval is how production's freshness ranks a row among the rows due: the sweep
// divides a due row's lateness by it, as ready divides by the cadence. A row filed at its
// crossing (DueAfter: intervalMs after its render, its marginal value h then at least ν) is
// worth, late by d, about h(intervalMs) + h′(intervalMs)·d: ranking by d ÷ (ν / h′) renders first
// the rows whose value has grown most past the threshold, in units of ν, which is the order the
// optimal policy renders a backlog in (the page with the highest h first). A row filed at its
// ceiling because h does not reach ν by then (crossMs 0) is there for the guarantee, not its
// value: it ranks by lateness ÷ baseMs, what its ceiling stretches (the route's interval), as
// ready ranks by lateness ÷ cadence. Not by the ceiling itself: under scarcity the tuning
// stretches a ceiling to several intervals, and a row ranked by it gains on the rows ranked by
// value that many times more slowly, so it waits past the ceiling it was filed at (the
// simulator's held-out home page at 25 % capacity and 10-minute sweeps: 4.49× its interval
// apart, against ready's 4.17×).
// A row filed at its crossing ranks by at most its ceiling (maxMs, the ceiling it was filed
// under): ν ÷ h′ is capped there. A page whose value has nearly saturated when it crosses ν (it
// changes many times an interval and is asked little) has a slope near 0 and ν ÷ h′ of days:
// uncapped it ranked behind every row at its ceiling and, once the still pages' renders went
// to the rows worth most, waited past the ceiling it was filed under (the simulator's held-out
// product route at full capacity: 1.76× its interval against ready's 1.45×). Capped at the
// route's interval instead, such rows outranked the rows worth most under scarcity (held-out
// at 25 %: 47.9 % stale against 46.2 %).
// The result is 0 when there is no threshold (nu ≤ 0: every page is worth rendering at its
// floor) or no slope, and then the row ranks by its cadence.
//
// Within a class of rows of one rank interval, rows order by due time at every now: the
// property the sweep's class merge needs. The rank interval takes as many values as there are
// pages, so the sweep's classes are its logarithmic buckets, not the routes' cadences.
func RankInterval(lambda, mu, nu float64, crossMs, intervalMs, baseMs, maxMs int64) int64 {
	if crossMs <= 0 {
		return max(baseMs, 0)
	}
	if !(nu > 0) {
		return 0
	}
	s := Slope(lambda, mu, intervalMs)
	if s <= 0 {
		return 0
	}
	ms := clean(nu/s) * msPerHour
	if maxMs > 0 && ms >= float64(maxMs) {
		return maxMs
	}
	if ms >= float64(maxRankMs) {
		return maxRankMs
	}
	return max(int64(ms), 1)
}

// maxRankMs bounds RankInterval well inside int64 (a saturated page's slope is next to 0):
// about a century; the policy clamps it to policy.MaxCadence anyway.
const maxRankMs = 100 * 365 * 24 * 3_600_000

// RetryRankMs is the rank interval of a retry (RetryRank): the shortest the policy keeps
// (policy.MinRankInterval, a millisecond). Late by a second past its backoff, a retry ranks
// as a row ranked by value ranks a thousand of its rank intervals late, so the next sweep
// publishes it ahead of the rows ranked by value, even on a route of a minute, whose rows worth
// most rank by seconds (a minute, the shortest cadence, ranked it behind them there).
const RetryRankMs = 1

// RetryRank is the rank interval production's freshness files with a failed attempt's retry
// (0: none, the row ranks by its cadence as under ready). A transient failure of a page that
// rendered before is retried after its backoff, but the page has already waited for its grant
// once, at its crossing or its ceiling: ranked by lateness ÷ cadence from its backoff, it
// would wait a second time behind the rows ranked by value, and its interval between two
// successful renders grow past what ready leaves (the simulator's product route: 1.61× its
// interval against ready's 1.45×). Ranked by RetryRankMs it is published at the first sweep
// after its backoff. The retries are few (a transient failure's share of the attempts), so
// the rows ranked by value lose little. A page never rendered, or one failing for a cause
// other than a transient one (gone, noindex, blocked: its backoff or its seal decide), ranks
// as under ready.
func RetryRank(transient, neverRendered bool) int64 {
	if !transient || neverRendered {
		return 0
	}
	return RetryRankMs
}
