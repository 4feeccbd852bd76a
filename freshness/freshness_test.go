package freshness

import (
	"math"
	"math/rand/v2"
	"testing"
)

// poissonChanged reports whether a Poisson process at lambda (per hour) had an event in an
// interval of tau hours.
func poissonChanged(rng *rand.Rand, lambda, tau float64) bool {
	return rng.Float64() < -math.Expm1(-lambda*tau)
}

// TestRateIrregularBias measures the compact estimator against the truth and against Exact
// on renders at irregular intervals (uniform between ½ and 2 of a mean interval), for change
// rates from slow to fast relative to the renders, over many pages of 40 renders each.
func TestRateIrregularBias(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const pages, renders = 400, 40
	for _, c := range []struct {
		lambda, meanTau float64 // per hour, hours
		maxBias         float64 // |mean estimate / truth − 1|
		maxGap          float64 // |mean estimate / mean Exact − 1|: the mean-interval approximation
	}{
		{0.01, 24, 0.05, 0.03},    // λτ̄ = 0.24
		{0.05, 12, 0.05, 0.03},    // 0.6
		{0.2, 6, 0.05, 0.04},      // 1.2
		{1.0 / 6, 12, 0.06, 0.08}, // 2: a render rarely finds the page unchanged
	} {
		sumRate, sumExact := 0.0, 0.0
		for range pages {
			var h History
			var obs []Observation
			for range renders {
				tau := c.meanTau * (0.5 + 1.5*rng.Float64())
				o := Observation{Changed: poissonChanged(rng, c.lambda, tau), IntervalMs: int64(tau * msPerHour)}
				h.Observe(o)
				obs = append(obs, o)
			}
			sumRate += h.Rate(Prior{})
			sumExact += Exact(obs, Prior{})
		}
		meanRate, meanExact := sumRate/pages, sumExact/pages
		bias := meanRate/c.lambda - 1
		t.Logf("λ=%.3f/h τ̄=%gh: rate %.4f (bias %+.1f%%), exact %.4f (%+.1f%%)", c.lambda, c.meanTau,
			meanRate, 100*bias, meanExact, 100*(meanExact/c.lambda-1))
		if math.Abs(bias) > c.maxBias {
			t.Errorf("λ=%g τ̄=%g: compact estimate's bias %.1f%% exceeds %.0f%%", c.lambda, c.meanTau, 100*bias, 100*c.maxBias)
		}
		if d := math.Abs(meanRate/meanExact - 1); d > c.maxGap {
			t.Errorf("λ=%g τ̄=%g: compact estimate %.4f is %.1f%% from the exact one %.4f", c.lambda, c.meanTau, meanRate, 100*d, meanExact)
		}
	}
}

// TestRatePriorFades: a prior starts the page at its rate, and the page's own renders take
// over: after many renders the estimate is near the truth whatever the prior said.
func TestRatePriorFades(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, prior := range []Prior{
		{RatePerHour: 1, Weight: 2, IntervalMs: 1 * msPerHour},      // prior: hourly
		{RatePerHour: 0.001, Weight: 2, IntervalMs: 48 * msPerHour}, // prior: almost never
	} {
		var h History
		if got := h.Rate(prior); math.Abs(got/prior.RatePerHour-1) > 1e-9 {
			t.Errorf("prior %+v alone: rate %g, want %g", prior, got, prior.RatePerHour)
		}
		for range 2000 {
			h.Observe(Observation{Changed: poissonChanged(rng, 0.05, 6), IntervalMs: 6 * msPerHour})
		}
		if got := h.Rate(prior); math.Abs(got/0.05-1) > 0.1 {
			t.Errorf("prior %+v, 2000 renders of a page changing at 0.05/h: rate %g", prior, got)
		}
	}
}

// Pooling the histories of a route's pages is observing all their renders as one page's: a
// route whose pages change at one rate pools to about that rate, a route whose pages never
// changed to 0, and nonsense pooled is nothing.
func TestPoolIsTheRoutesRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var pooled, together History
	for range 50 {
		var page History
		for range 40 {
			o := Observation{Changed: poissonChanged(rng, 0.1, 4), IntervalMs: 4 * msPerHour}
			page.Observe(o)
			together.Observe(o)
		}
		pooled.Pool(page)
	}
	if pooled != together {
		t.Fatalf("pooled %+v, observed together %+v", pooled, together)
	}
	if got := pooled.Rate(Prior{}); math.Abs(got/0.1-1) > 0.1 {
		t.Errorf("50 pages changing at 0.1/h pooled: rate %g", got)
	}
	var never History
	never.Pool(History{UnchangedHours: 96})
	if !never.Observed() || never.Rate(Prior{}) != 0 {
		t.Errorf("a route that never changed: observed %v, rate %g", never.Observed(), never.Rate(Prior{}))
	}
	var bad History
	bad.Pool(History{Changed: math.NaN(), ChangedHours: math.Inf(1), UnchangedHours: -5})
	if bad.Observed() || bad != (History{}) {
		t.Errorf("nonsense pooled: %+v", bad)
	}
}

// A page starts from its route's pooled rate when the tuning has one, and from one change a
// cadence otherwise: a route the tuning does not name, or no tuning yet. A route whose pages
// never changed keeps its pooled rate of 0, not the cadence's.
func TestPriorRateForIsPooledElseTheCadence(t *testing.T) {
	tu := &Tuning{RouteRate: map[string]float64{"catalog": 0.25, "static": 0}}
	var none *Tuning
	for _, c := range []struct {
		tu    *Tuning
		route string
		want  float64
	}{
		{tu, "catalog", 0.25},
		{tu, "static", 0},
		{tu, "product", 0.5}, // 2 h cadence
		{none, "catalog", 0.5},
	} {
		if got := c.tu.PriorRateFor(c.route, 2*msPerHour); got != c.want {
			t.Errorf("tuning %v, route %q: %g an hour, want %g", c.tu != nil, c.route, got, c.want)
		}
	}
}

// A prior's pseudo-renders are as far apart as its rate's interval, at most a cadence, and it
// alone estimates its rate; a rate of 0 is "never changes".
func TestPriorAt(t *testing.T) {
	for _, c := range []struct {
		rate       float64
		cadenceMs  int64
		intervalMs int64
	}{
		{0.5, 6 * msPerHour, 2 * msPerHour},
		{0.01, 6 * msPerHour, 6 * msPerHour},
		{0, 6 * msPerHour, 6 * msPerHour},
		{math.NaN(), 6 * msPerHour, 6 * msPerHour},
	} {
		p := PriorAt(c.rate, c.cadenceMs, 1)
		if p.IntervalMs != c.intervalMs {
			t.Errorf("PriorAt(%v, %d): pseudo-renders %d ms apart, want %d", c.rate, c.cadenceMs, p.IntervalMs, c.intervalMs)
		}
		want := c.rate
		if math.IsNaN(want) {
			want = 0
		}
		if got := (History{}).Rate(p); math.Abs(got-want) > 1e-9 {
			t.Errorf("PriorAt(%v, %d) alone estimates %g", c.rate, c.cadenceMs, got)
		}
	}
}

// TestFiniteOnNonsense: nothing from outside makes a rate, a score or a plan NaN, Inf or
// negative.
func TestFiniteOnNonsense(t *testing.T) {
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 0}
	ok := func(what string, v float64) {
		t.Helper()
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Errorf("%s = %v", what, v)
		}
	}
	for _, a := range bad {
		for _, b := range bad {
			ok("Rate", History{Changed: a, ChangedHours: b, UnchangedHours: a}.Rate(Prior{RatePerHour: b, Weight: a, IntervalMs: 3600}))
			ok("Score", Score(a, b, 3600_000, Bounds{}))
			ok("StaleServes", StaleServes(a, b, 3600_000))
			ok("StaleShare", StaleShare(a, b))
			c := Counter{Value: a}
			c.Add(10, b, 1000)
			ok("Counter", c.PerHour(20, 1000))
			for _, f := range Optimal([]Page{{Lambda: a, Mu: b}, {Lambda: 1, Mu: 1}}, b).PerHour {
				ok("Optimal", f)
			}
		}
	}
}

// TestSeriesMeetsClosedForm: the small-λt series and the closed forms agree where they meet.
func TestSeriesMeetsClosedForm(t *testing.T) {
	const l, m = 1.0, 7.0
	below, above := int64(1e-3*msPerHour)-1, int64(1e-3*msPerHour)+1
	// Both grow as t² there: the step across the switch must be the one t² predicts.
	want := math.Pow(float64(above)/float64(below), 2)
	for name, f := range map[string]func(float64, float64, int64) float64{"StaleServes": StaleServes, "Marginal": Marginal} {
		a, b := f(l, m, below), f(l, m, above)
		if r := b / a; math.Abs(r/want-1) > 1e-5 {
			t.Errorf("%s: %g just below the switch, %g just above: ratio %g, want %g", name, a, b, r, want)
		}
	}
}

// TestScoreOrder: within bounds the score rises with time since the render; a row at its
// ceiling outranks every row inside bounds, however valuable.
func TestScoreOrder(t *testing.T) {
	b := Bounds{MinIntervalMs: 30 * 60_000, MaxIntervalMs: 48 * msPerHour}
	prev := -1.0
	for since := b.MinIntervalMs; since < b.MaxIntervalMs; since += 7 * 60_000 {
		s := Score(0.5, 100, since, b)
		if s < prev {
			t.Fatalf("score fell from %g to %g at %d ms", prev, s, since)
		}
		prev = s
	}
	if hot, dull := Score(1e3, 1e9, b.MaxIntervalMs-1, b), Score(0, 0, b.MaxIntervalMs, b); dull <= hot {
		t.Errorf("a row at its ceiling (%g) does not outrank a row inside bounds (%g)", dull, hot)
	}
}

// TestOptimalIsOptimal: the plan spends the budget, every page strictly inside its bounds sits
// at the common multiplier, and moving rate between two pages never lowers the stale serves.
func TestOptimalIsOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pages := make([]Page, 200)
	for i := range pages {
		pages[i] = Page{Lambda: math.Exp(rng.Float64()*8 - 6), Mu: math.Exp(rng.Float64() * 6), MinPerHour: 1.0 / 96, MaxPerHour: 4}
		if i%5 == 0 {
			pages[i].Lambda = 0
		}
	}
	const budget = 20.0
	plan := Optimal(pages, budget)
	stale := func(f []float64) float64 {
		s := 0.0
		for i, p := range pages {
			s += p.Mu * StaleShare(p.Lambda, f[i])
		}
		return s
	}
	sum := 0.0
	for i, f := range plan.PerHour {
		sum += f
		p := pages[i]
		if f > p.MinPerHour*1.0001 && f < p.MaxPerHour*0.9999 {
			if h := Marginal(p.Lambda, p.Mu, int64(msPerHour/f)); math.Abs(h/plan.Nu-1) > 1e-3 {
				t.Errorf("page %d inside bounds at marginal %g, multiplier %g", i, h, plan.Nu)
			}
		}
	}
	if math.Abs(sum/budget-1) > 1e-6 {
		t.Fatalf("plan spends %g of %g", sum, budget)
	}
	best := stale(plan.PerHour)
	for range 2000 {
		i, j := rng.IntN(len(pages)), rng.IntN(len(pages))
		d := plan.PerHour[i] * 0.05
		if i == j || plan.PerHour[i]-d < pages[i].MinPerHour || plan.PerHour[j]+d > pages[j].MaxPerHour {
			continue
		}
		f := append([]float64(nil), plan.PerHour...)
		f[i] -= d
		f[j] += d
		if s := stale(f); s < best*(1-1e-9) {
			t.Fatalf("moving %g/h from page %d to %d lowers stale serves from %g to %g", d, i, j, best, s)
		}
	}
}

// TestCounterSteadyState: requests at a steady Poisson rate, counted one by one, read back
// as that rate after a few tau.
func TestCounterSteadyState(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const mu, tau = 12.0, 6 * msPerHour // per hour, ms
	c := NewCounter(0, 0, tau)
	now := int64(0)
	sum, n := 0.0, 0
	for now < 200*msPerHour {
		now += int64(rng.ExpFloat64() / mu * msPerHour)
		c.Add(now, 1, tau)
		if now > 30*msPerHour {
			sum += c.PerHour(now, tau)
			n++
		}
	}
	if got := sum / float64(n); math.Abs(got/mu-1) > 0.05 {
		t.Errorf("mean rate read %g, want %g within 5%%", got, mu)
	}
}

// TestSlopeIsMarginalsDerivative: Slope is dh/dt, against a central difference of Marginal.
func TestSlopeIsMarginalsDerivative(t *testing.T) {
	for _, c := range []struct{ lambda, mu, hours float64 }{{0.01, 5, 30}, {0.5, 100, 2}, {2, 40, 0.5}, {4, 1, 6}} {
		at := int64(c.hours * msPerHour)
		const step = 6_000 // six seconds either side
		want := (Marginal(c.lambda, c.mu, at+step) - Marginal(c.lambda, c.mu, at-step)) / (2 * float64(step) / msPerHour)
		if got := Slope(c.lambda, c.mu, at); math.Abs(got/want-1) > 1e-4 {
			t.Errorf("λ %g μ %g at %gh: Slope %g, the difference of Marginal gives %g", c.lambda, c.mu, c.hours, got, want)
		}
	}
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }
	for _, a := range []float64{math.NaN(), math.Inf(1), -1, 0} {
		if v := Slope(a, 3, msPerHour); !ok(v) {
			t.Errorf("Slope(%g, 3, 1h) = %g", a, v)
		}
		if v := Slope(1, a, msPerHour); !ok(v) {
			t.Errorf("Slope(1, %g, 1h) = %g", a, v)
		}
	}
}

// TestRankIntervalOrdersByValueGained: rows filed at their crossing rank, late by the same time,
// in the order their marginal value has grown past ν (the rank interval is ν ÷ h′ at the
// filed interval); a row filed at its ceiling ranks by what the ceiling stretches; no
// threshold, no rank.
func TestRankIntervalOrdersByValueGained(t *testing.T) {
	const nu, maxMs, minMs = 2.0, 96 * msPerHour, 15 * 60_000
	pages := []struct{ lambda, mu float64 }{{0.05, 40}, {0.5, 20}, {0.2, 200}, {1, 9}, {0.02, 500}}
	const lateMs = 20 * 60_000
	var ranks []int64
	for _, p := range pages {
		cross, iv := DueAfter(p.lambda, p.mu, nu, minMs, maxMs, 0)
		if cross == 0 {
			t.Fatalf("λ %g μ %g does not reach ν %g within the ceiling: pick another page", p.lambda, p.mu, nu)
		}
		r := RankInterval(p.lambda, p.mu, nu, cross, iv, maxMs, 0)
		if prod := float64(r) / msPerHour * Slope(p.lambda, p.mu, iv); math.Abs(prod/nu-1) > 1e-6 {
			t.Errorf("λ %g μ %g: rank interval %d ms × slope = %g, want ν %g", p.lambda, p.mu, r, prod, nu)
		}
		ranks = append(ranks, r)
	}
	for i := range pages {
		for j := range pages {
			gi := Marginal(pages[i].lambda, pages[i].mu, ivOf(pages[i].lambda, pages[i].mu, nu, minMs, maxMs)+lateMs)
			gj := Marginal(pages[j].lambda, pages[j].mu, ivOf(pages[j].lambda, pages[j].mu, nu, minMs, maxMs)+lateMs)
			// Late by 20 minutes, the linear order must agree with the true gain where the
			// gains differ by more than the curvature the linearisation leaves out.
			if gi > gj*1.05 && ranks[i] >= ranks[j] {
				t.Errorf("page %d gained %g and page %d %g late by 20m, yet rank intervals %d ≥ %d", i, gi, j, gj, ranks[i], ranks[j])
			}
		}
	}
	const baseMs = maxMs / 4 // the route's interval a tuning stretched 4×
	if r := RankInterval(0.001, 0.01, nu, 0, maxMs, baseMs, maxMs); r != baseMs {
		t.Errorf("a row filed at its ceiling ranks by %d ms, want the route's interval %d, not the ceiling", r, int64(baseMs))
	}
	if r := RankInterval(0.5, 20, 0, 1, minMs, maxMs, maxMs); r != 0 {
		t.Errorf("without a threshold the rank interval is %d, want 0 (the cadence)", r)
	}
}

func ivOf(lambda, mu, nu float64, minMs, maxMs int64) int64 {
	_, iv := DueAfter(lambda, mu, nu, minMs, maxMs, 0)
	return iv
}

// TestDueAfterLead: a page that does not reach ν by its ceiling is due one lead before it
// (never before its floor); a page that does is due at its crossing whatever the lead.
func TestDueAfterLead(t *testing.T) {
	const minMs, maxMs, lead = 15 * 60_000, 48 * msPerHour, 5 * 60_000
	if cross, iv := DueAfter(0.001, 0.01, 5, minMs, maxMs, lead); cross != 0 || iv != maxMs-lead {
		t.Errorf("dull page: crossing %d, interval %d; want 0 and the ceiling less the lead, %d", cross, iv, int64(maxMs-lead))
	}
	if _, iv := DueAfter(0.001, 0.01, 5, minMs, maxMs, maxMs); iv != minMs {
		t.Errorf("a lead past the floor: interval %d, want the floor %d", iv, int64(minMs))
	}
	c0, iv0 := DueAfter(0.5, 40, 2, minMs, maxMs, 0)
	c1, iv1 := DueAfter(0.5, 40, 2, minMs, maxMs, lead)
	if c0 == 0 || c0 != c1 || iv0 != iv1 {
		t.Errorf("a page crossing ν: (%d, %d) without a lead, (%d, %d) with one; want equal crossings", c0, iv0, c1, iv1)
	}
}

// A retry ranks by RetryRankMs only after a transient failure of a page rendered before;
// otherwise it files none (0: it ranks by its cadence, as under ready).
func TestRetryRank(t *testing.T) {
	for _, c := range []struct {
		transient, never bool
		want             int64
	}{{true, false, RetryRankMs}, {true, true, 0}, {false, false, 0}, {false, true, 0}} {
		if got := RetryRank(c.transient, c.never); got != c.want {
			t.Errorf("transient %v, never rendered %v: %d, want %d", c.transient, c.never, got, c.want)
		}
	}
}
