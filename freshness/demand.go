package freshness

import "math"

// Counter is a page's request rate, an exponentially weighted average of the rates its flushes
// counted, on a time scale that follows the page's own traffic: each flush of n requests over
// the Δt since the counter's last moves the rate towards n/Δt with weight 1 − e^{−Δt/τₑ}, where
// τₑ = RequestMemory ÷ (the larger of the rate and n/Δt), the time the page takes to be asked
// RequestMemory times, and never more than tau (freshness.request_tau). A page asked thousands
// of times an hour follows its traffic within seconds, one asked a hundred times within
// minutes, and one asked a few times a day keeps a day's memory, so that a steady page is not
// jittery and a new site's rates are its own within minutes rather than the prior for a day.
// (A fixed time constant of a day kept a new page near its prior for hours: a page asked
// 3,000 times an hour read 6 an hour after three minutes.) Taking the larger rate lets a
// rise be seen at once; its cost is a bias upward for a page counted a few requests a flush
// (about 18 % at two a flush), the same for every such page.
//
// Value is the rate times tau, so that PerHour (Value ÷ tau) reads a stored counter of either
// kind alike; between flushes it decays with tau, as the requests of the flush to come are not
// yet counted. Two numbers: 12 bytes (float32 and seconds suffice on disk). Time is passed in;
// tau is the caller's (configuration), passed to every call rather than stored.
type Counter struct {
	Value float64 // the rate at AtMs times tau (a decayed request count, for a steady page)
	AtMs  int64
}

// NewCounter returns a counter at nowMs whose rate is priorPerHour: a page never requested yet
// counts as its route's typical page, and its own requests replace that as they come
// (RequestMemory of them). nowMs is the start of the time its first Add counts over.
func NewCounter(nowMs int64, priorPerHour float64, tauMs int64) Counter {
	return Counter{Value: clean(priorPerHour) * hours(tauMs), AtMs: nowMs}
}

// FirstCount is the counter of a page counted for the first time: n requests over the flush
// from fromMs to nowMs. Its rate is what that flush counted, n ÷ its length: the prior stands
// for a page never counted, and a page's own first count says more of its traffic than a
// prior set for a whole route (freshness.requests, a tenth of a request an hour, would keep
// a page asked hundreds of times an hour near it for as long as its memory). One flush's count
// is noisy (a page asked once in a minute reads 60 an hour); the next flushes average it out
// at the page's own time scale (Add). A flush of no length (fromMs ≥ nowMs) counts as Add to a
// counter at priorPerHour does.
func FirstCount(fromMs, nowMs int64, n, priorPerHour float64, tauMs int64) Counter {
	if fromMs >= nowMs || tauMs <= 0 {
		c := NewCounter(nowMs, priorPerHour, tauMs)
		c.Add(nowMs, n, tauMs)
		return c
	}
	return Counter{Value: clean(n) / hours(nowMs-fromMs) * hours(tauMs), AtMs: nowMs}
}

func hours(ms int64) float64 { return float64(max(ms, 0)) / msPerHour }

// decay returns the factor for dt ms at tau; a non-positive tau forgets everything at once.
func decay(dtMs, tauMs int64) float64 {
	if tauMs <= 0 {
		return 0
	}
	return math.Exp(-float64(dtMs) / float64(tauMs))
}

// RequestMemory is how many of a page's own requests its Counter remembers: the time
// constant of its average is the time the page takes to be asked this many times (at most
// tau). 32 requests put the noise of a steady page's rate at about 1/√64, 12 %.
const RequestMemory = 32

// Add counts n requests at nowMs, counted over the time since the counter's own (its last
// flush with requests, or NewCounter's start). A time at or before the counter's own (a late
// report) is added to the rate as if counted over tau, so time never moves back; a negative or
// non-finite n is ignored.
func (c *Counter) Add(nowMs int64, n float64, tauMs int64) {
	n = clean(n)
	if tauMs <= 0 {
		c.Value, c.AtMs = 0, max(nowMs, c.AtMs)
		return
	}
	if nowMs <= c.AtMs {
		c.Value += n * decay(c.AtMs-nowMs, tauMs)
		return
	}
	tauH := hours(tauMs)
	rate, dt := clean(c.Value)/tauH, hours(nowMs-c.AtMs)
	seen := n / dt
	// The time scale is the larger of the rate and what the flush says the rate at least is
	// (n − √n, a Poisson count less one standard deviation): a rise is followed at once, while
	// a count within the noise of a steady page's (and a lone request, counted one by one)
	// moves the rate at its own time scale.
	memory := tauH
	if fast := max(rate, (n-math.Sqrt(n))/dt); fast > 0 {
		memory = min(RequestMemory/fast, tauH)
	}
	w := -math.Expm1(-dt / memory)
	c.Value = clean(rate*(1-w)+seen*w) * tauH
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
