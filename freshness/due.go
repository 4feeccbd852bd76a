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
// later than maxMs (the ceiling); a page whose h does not reach nu by the ceiling is due at
// it. crossMs is the crossing itself (0: not within maxMs), as GET /v1/targets explains it.
func DueAfter(lambda, mu, nu float64, minMs, maxMs int64) (crossMs, intervalMs int64) {
	crossMs = Crossing(lambda, mu, nu, maxMs)
	intervalMs = maxMs
	if crossMs > 0 {
		intervalMs = min(max(crossMs, minMs), maxMs)
	}
	return crossMs, intervalMs
}

// MaxThreshold is the threshold that makes every page wait for its ceiling: what Threshold
// returns when the ceilings alone ask for more renders than the budget. It is finite so that it
// survives JSON (GET /v1/targets' explanation) and far above any page's μ/λ.
const MaxThreshold = 1e12

// Threshold is the multiplier ν at which the pages, each rendered when its marginal value
// reaches ν within its bounds, ask for budgetPerHour renders: Optimal's Lagrange multiplier. It
// is MaxThreshold when the ceilings (MinPerHour) alone ask for the budget or more, and 0 when
// every page at its floor (MaxPerHour) fits within it. A page with neither change nor requests
// asks only for its ceiling's rate.
func Threshold(pages []Page, budgetPerHour float64) float64 {
	budget, sumMin := clean(budgetPerHour), 0.0
	for _, p := range pages {
		sumMin += clean(p.MinPerHour)
	}
	if sumMin >= budget {
		return MaxThreshold
	}
	nu := Optimal(pages, budget).Nu
	return math.Min(clean(nu), MaxThreshold)
}
