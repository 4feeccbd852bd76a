package freshness

import "math"

// Page is what the oracle knows of a page: its true change and request rates, per hour, and
// its bounds as rates (MinPerHour from the ceiling, MaxPerHour from the floor; 0 = unbounded).
type Page struct {
	Lambda, Mu             float64
	MinPerHour, MaxPerHour float64
}

// Plan is the oracle's answer: a render rate per page, per hour, and the multiplier ν they
// share (the marginal value at which every page inside its bounds is rendered).
type Plan struct {
	PerHour []float64
	Nu      float64
	// Bound reports that the bounds alone decide: the floors' rates already exceed the budget
	// (every page at MinPerHour), or the ceilings' fit within it (every page at MaxPerHour).
	Bound bool
}

// Optimal returns the render rates that minimise the expected number of stale serves,
// Σ μᵢ·StaleShare(λᵢ, fᵢ), subject to Σ fᵢ = budgetPerHour and each fᵢ within its page's
// bounds: water-filling on the Lagrangian. For a multiplier ν every page takes the rate at
// which its marginal value Marginal reaches ν (the rate falls as ν rises), clamped to its
// bounds; the total falls monotonically in ν, so bisection on ln ν finds the ν that spends the
// budget. The objective is convex in f, so this is the optimum.
func Optimal(pages []Page, budgetPerHour float64) Plan {
	plan := Plan{PerHour: make([]float64, len(pages))}
	budget := clean(budgetPerHour)
	sumMin, sumMax, unbounded := 0.0, 0.0, false
	for _, p := range pages {
		sumMin += clean(p.MinPerHour)
		if p.MaxPerHour > 0 {
			sumMax += p.MaxPerHour
		} else {
			unbounded = true
		}
	}
	fill := func(nu float64) float64 {
		total := 0.0
		for i, p := range pages {
			plan.PerHour[i] = rateAt(p, nu)
			total += plan.PerHour[i]
		}
		return total
	}
	switch {
	case sumMin >= budget:
		for i, p := range pages {
			plan.PerHour[i] = clean(p.MinPerHour)
		}
		plan.Bound = true
		return plan
	case !unbounded && sumMax <= budget:
		for i, p := range pages {
			plan.PerHour[i] = p.MaxPerHour
		}
		plan.Bound = true
		return plan
	}
	lo, hi := math.Log(1e-15), math.Log(1e15) // fill(e^lo) > budget > fill(e^hi), given the checks
	for range 100 {
		mid := (lo + hi) / 2
		if fill(math.Exp(mid)) > budget {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 1e-9 {
			break
		}
	}
	plan.Nu = math.Exp(hi)
	fill(plan.Nu) // the side that does not overspend
	return plan
}

// rateAt is the page's rate at multiplier nu: the f = 1/τ at which Marginal(τ) = ν, clamped to
// the page's bounds. Marginal(τ) = (μ/λ)·(1 − e^{−x}(1+x)) with x = λτ, so τ solves
// 1 − e^{−x}(1+x) = νλ/μ; when νλ/μ ≥ 1 the page is never worth its render (rate 0 before
// the bounds).
func rateAt(p Page, nu float64) float64 {
	l, m := clean(p.Lambda), clean(p.Mu)
	f := 0.0
	if l > 0 && m > 0 {
		if y := nu * l / m; y < 1 {
			if x := solveX(y); x > 0 {
				f = l / x
			}
		}
	}
	f = math.Max(f, clean(p.MinPerHour))
	if p.MaxPerHour > 0 {
		f = math.Min(f, p.MaxPerHour)
	}
	return f
}

// solveX returns the x > 0 with 1 − e^{−x}(1+x) = y, for 0 < y < 1: Newton's method (the
// derivative is x·e^{−x}) kept inside a bracket that bisection narrows whenever a step would
// leave it, since the left side rises monotonically from 0 to 1 but is convex below x = 1 and
// concave above. Near 0 it is x²/2, near 1 it needs x of a few tens. A few steps suffice where
// bisection alone took fifty: Threshold runs it for every row of a corpus at every step of its
// own bisection.
func solveX(y float64) float64 {
	if y <= 0 {
		return 0
	}
	lo, hi := 0.0, 1.0
	g := func(x float64) float64 {
		if x < 1e-4 {
			return x * x * (0.5 - x/3) // the series: the difference below cancels to noise
		}
		return -math.Expm1(-x) - x*math.Exp(-x)
	}
	for g(hi) < y && hi < 1e6 {
		lo, hi = hi, hi*2
	}
	x := math.Max(math.Min(math.Sqrt(2*y), hi), lo)
	for range 200 {
		gx := g(x) - y
		if gx < 0 {
			lo = x
		} else {
			hi = x
		}
		next := x - gx/(x*math.Exp(-x))
		if !(next > lo && next < hi) {
			next = (lo + hi) / 2
		}
		if math.Abs(next-x) <= 1e-12*next || hi-lo <= 1e-12*hi {
			return next
		}
		x = next
	}
	return x
}
