package freshness

import "math"

// Counter is a page's request rate, decayed exponentially with time constant tau: each request
// adds one, and the sum decays by e^{−Δt/tau}. For requests at a steady rate μ its expected value
// is μ·tau, so PerHour (value ÷ tau) is an unbiased rate once the page has been counted for a
// few tau, and NewCounter starts it at the route's prior rate so that it is sensible before.
// Two numbers: 12 bytes (float32 and seconds suffice on disk). Time is passed in; tau is the
// caller's (configuration), passed to every call rather than stored.
type Counter struct {
	Value float64 // decayed request count at AtMs
	AtMs  int64
}

// NewCounter returns a counter at nowMs whose rate is priorPerHour: a page never requested yet
// counts as its route's typical page, and its own requests replace that within a few tau.
func NewCounter(nowMs int64, priorPerHour float64, tauMs int64) Counter {
	return Counter{Value: clean(priorPerHour) * hours(tauMs), AtMs: nowMs}
}

func hours(ms int64) float64 { return float64(max(ms, 0)) / msPerHour }

// decay returns the factor for dt ms at tau; a non-positive tau forgets everything at once.
func decay(dtMs, tauMs int64) float64 {
	if tauMs <= 0 {
		return 0
	}
	return math.Exp(-float64(dtMs) / float64(tauMs))
}

// Add counts n requests at nowMs. A time before the counter's own (a late report) is added
// decayed to the counter's time, so time never moves back; a negative or non-finite n is
// ignored.
func (c *Counter) Add(nowMs int64, n float64, tauMs int64) {
	n = clean(n)
	if nowMs <= c.AtMs {
		c.Value += n * decay(c.AtMs-nowMs, tauMs)
		return
	}
	c.Value = clean(c.Value)*decay(nowMs-c.AtMs, tauMs) + n
	c.AtMs = nowMs
}

// PerHour is the request rate at nowMs, per hour.
func (c Counter) PerHour(nowMs int64, tauMs int64) float64 {
	if tauMs <= 0 {
		return 0
	}
	v := clean(c.Value)
	if nowMs > c.AtMs {
		v *= decay(nowMs-c.AtMs, tauMs)
	}
	return v / hours(tauMs)
}
