package freshness

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// poissonN draws a Poisson count of mean m (Knuth's method for small m, normal beyond).
func poissonN(rng *rand.Rand, m float64) float64 {
	if m > 50 {
		return math.Max(0, math.Round(m+math.Sqrt(m)*rng.NormFloat64()))
	}
	l, k, p := math.Exp(-m), 0.0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// feed flushes a counter every flushMs from fromMs for durMs with Poisson counts at perHour,
// as the demand flush does (a flush without requests writes nothing), and returns the time
// reached.
func feed(rng *rand.Rand, c *Counter, fromMs, durMs, flushMs int64, perHour float64, tauMs int64) int64 {
	now := fromMs
	for now+flushMs <= fromMs+durMs {
		now += flushMs
		if n := poissonN(rng, perHour*hours(flushMs)); n > 0 {
			c.Add(now, n, tauMs)
		}
	}
	return now
}

// A new page's request rate is its own within minutes, under the production default time
// constant of a day and a prior far below its traffic: what a new site needs to be steered
// before any tuning. How close depends on how many requests three minutes hold: over 16
// seeds, the median within 35 % for a page asked 300 times an hour or more, within a factor 3
// for 30 an hour (a first flush of one request reads 60 an hour), and no page ever more than
// a factor 6 off (an unlucky first flush of three requests for a page asked 30 times an hour
// reads 180).
func TestCounterLearnsNewPageInMinutes(t *testing.T) {
	const tau, flush = 24 * msPerHour, 60_000
	for _, c := range []struct{ mu, lo, hi float64 }{{30, 1.0 / 3, 3}, {300, 0.65, 1.35}, {3_000, 0.65, 1.35}, {30_000, 0.65, 1.35}} {
		var got []float64
		for seed := range uint64(16) {
			rng := rand.New(rand.NewPCG(seed, uint64(c.mu)))
			// The demand flush counts a page first with FirstCount, at its first flush with
			// requests; the page is at its prior until then.
			now, n := int64(0), 0.0
			for n == 0 {
				now += flush
				n = poissonN(rng, c.mu*hours(flush))
			}
			ctr := FirstCount(now-flush, now, n, 0.1, tau)
			now = feed(rng, &ctr, now, 3*60_000, flush, c.mu, tau)
			r := ctr.PerHour(now, tau)
			if r < c.mu/6 || r > 6*c.mu {
				t.Errorf("a page asked %g an hour (seed %d), 3 minutes after its first flush: rate %.1f, more than 6× off", c.mu, seed, r)
			}
			got = append(got, r)
		}
		slices.Sort(got)
		if med := (got[7] + got[8]) / 2; med < c.lo*c.mu || med > c.hi*c.mu {
			t.Errorf("pages asked %g an hour, 3 minutes after their first flush: median rate %.1f, want %g..%g×", c.mu, med, c.lo, c.hi)
		}
	}
}

// A page whose traffic falls is seen to fall within a few of its own flushes, and one whose
// traffic rises at once.
func TestCounterFollowsTraffic(t *testing.T) {
	const tau, flush = 24 * msPerHour, 60_000
	rng := rand.New(rand.NewPCG(2, 2))
	c := NewCounter(0, 3_000, tau)
	now := feed(rng, &c, 0, 30*60_000, flush, 3_000, tau)
	now = feed(rng, &c, now, 5*60_000, flush, 300, tau)
	if got := c.PerHour(now, tau); got > 600 {
		t.Errorf("5 minutes after the traffic fell from 3000 to 300 an hour: rate %.0f, want at most 600", got)
	}
	now = feed(rng, &c, now, 2*60_000, flush, 6_000, tau)
	if got := c.PerHour(now, tau); got < 4_000 {
		t.Errorf("2 minutes after the traffic rose to 6000 an hour: rate %.0f, want at least 4000", got)
	}
}

// A steady page's rate is not jittery: over a day of minute flushes at 120 an hour (two a
// flush), the rate stays within the bias the larger-rate rule costs and its noise.
func TestCounterSteadyNotJittery(t *testing.T) {
	const tau, flush = 24 * msPerHour, 60_000
	rng := rand.New(rand.NewPCG(3, 3))
	c := NewCounter(0, 120, tau)
	now := int64(0)
	var sum, sum2, n float64
	for range 24 * 60 {
		now = feed(rng, &c, now, flush, flush, 120, tau)
		r := c.PerHour(now, tau)
		sum, sum2, n = sum+r, sum2+r*r, n+1
	}
	mean := sum / n
	sd := math.Sqrt(sum2/n - mean*mean)
	if mean < 120 || mean > 120*1.3 {
		t.Errorf("steady 120 an hour: mean rate %.1f, want 120..156 (the larger-rate rule biases up)", mean)
	}
	if sd/mean > 0.25 {
		t.Errorf("steady 120 an hour: rate's spread %.1f %% of its mean, want at most 25 %%", 100*sd/mean)
	}
	// A page asked a few times a day keeps tau's memory: one request moves it by about 1/tau.
	slow := NewCounter(0, 0.1, tau)
	slow.Add(msPerHour, 1, tau)
	if got := slow.PerHour(msPerHour, tau); got > 1.5 {
		t.Errorf("a page at 0.1 an hour asked once in an hour: rate %.2f, want at most 1.5", got)
	}
}

// A page's first counted flush is its rate (the prior only stands for pages never counted),
// and a flush of no length adds to the prior as a late report does.
func TestFirstCount(t *testing.T) {
	const tau = 24 * msPerHour
	c := FirstCount(0, 60_000, 50, 0.1, tau)
	if got := c.PerHour(60_000, tau); math.Abs(got-3_000) > 1e-6 || c.AtMs != 60_000 {
		t.Errorf("50 requests in a minute's first flush: rate %g at %d, want 3000 at 60000", got, c.AtMs)
	}
	c = FirstCount(60_000, 60_000, 50, 0.1, tau)
	if got, want := c.PerHour(60_000, tau), 0.1+50/24.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("a flush of no length: rate %g, want the prior plus 50 over tau, %g", got, want)
	}
	for _, n := range []float64{math.NaN(), math.Inf(1), -3} {
		if got := FirstCount(0, 60_000, n, 0.1, tau).PerHour(60_000, tau); got != 0 {
			t.Errorf("FirstCount of %g requests: rate %g, want 0", n, got)
		}
	}
}
