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
