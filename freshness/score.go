package freshness

import "math"

// StaleServes is the expected number of requests served stale since a render sinceMs ago, for a
// page changing at lambda and requested at mu (both per hour): μ·(t − (1−e^{−λt})/λ). It is what
// rendering now would have prevented had the render come at the start.
func StaleServes(lambda, mu float64, sinceMs int64) float64 {
	l, m, t := clean(lambda), clean(mu), hours(sinceMs)
	if l == 0 || m == 0 || t == 0 {
		return 0
	}
	x := l * t
	if x < 1e-3 {
		return clean(m * t * (x/2 - x*x/6 + x*x*x/24))
	}
	return clean(m * (t + math.Expm1(-x)/l))
}

// Marginal is the page's marginal value of rendering now, sinceMs after its last render:
// h(t) = μ·((1−e^{−λt})/λ − t·e^{−λt}) = t·S′(t) − S(t), where S is StaleServes. Minimising the
// stale share under a render budget with Lagrange multiplier ν renders a page exactly when its h
// reaches ν (Azar et al. 2018); h grows from 0 towards μ/λ, so a page whose μ/λ is below ν is
// not worth rendering at all. Ranking rows by h and rendering the best that the capacity allows
// finds that common threshold without knowing ν.
func Marginal(lambda, mu float64, sinceMs int64) float64 {
	l, m, t := clean(lambda), clean(mu), hours(sinceMs)
	if l == 0 || m == 0 || t == 0 {
		return 0
	}
	x := l * t
	if x < 1e-3 {
		return clean(m * t * (x/2 - x*x/3 + x*x*x/8))
	}
	if x > 700 {
		return clean(m / l)
	}
	return clean(m * (-math.Expm1(-x) - x*math.Exp(-x)) / l)
}

// Bounds are the operator's limits on a row's renders: never again before MinIntervalMs after
// the last (the floor, min_interval), and never later than MaxIntervalMs after it (the route's
// interval, the guarantee operators have with the age policy). 0 means no such bound.
//
// LeadMs is how long before its ceiling a row already ranks as past it: the time between two
// publishes of the ready set (the sweep interval). A sweep publishes the rows it ranks now, so
// a row that reaches its ceiling just after a sweep would otherwise wait for the next one and
// be rendered up to a sweep interval past its ceiling; with the lead it is published at the
// last sweep before it, and the ceiling holds as the route's maximum time between renders.
type Bounds struct {
	MinIntervalMs int64
	MaxIntervalMs int64
	LeadMs        int64
}

// OverdueBase is the score at which a row reaches its ceiling: every row at or past
// Bounds.MaxIntervalMs ranks above every row inside its bounds, and among themselves by how
// many ceilings late they are, as the age policy ranks them. Marginal values are request
// counts, far below it.
const OverdueBase = 1e12

// Score is the freshness policy's rank for a row last rendered sinceMs ago: 0 before the
// floor; OverdueBase + (since + lead)/ceiling once since + lead reaches the ceiling (Overdue);
// between them the marginal value of rendering now (Marginal), capped below OverdueBase.
func Score(lambda, mu float64, sinceMs int64, b Bounds) float64 {
	if b.MinIntervalMs > 0 && sinceMs < b.MinIntervalMs {
		return 0
	}
	if b.Overdue(sinceMs) {
		return OverdueBase + float64(sinceMs+max(b.LeadMs, 0))/float64(b.MaxIntervalMs)
	}
	return math.Min(Marginal(lambda, mu, sinceMs), OverdueBase/2)
}

// Overdue reports whether a row last rendered sinceMs ago ranks as past its ceiling: since +
// lead reaches MaxIntervalMs (never without a ceiling).
func (b Bounds) Overdue(sinceMs int64) bool {
	return b.MaxIntervalMs > 0 && sinceMs+max(b.LeadMs, 0) >= b.MaxIntervalMs
}

// StaleShare is the long-run share of a page's requests served stale when it is rendered at
// rate perHour: 1 − f·(1−e^{−λ/f})/λ. Rendered never (f = 0) it is 1 for a page that changes.
func StaleShare(lambda, perHour float64) float64 {
	l, f := clean(lambda), clean(perHour)
	if l == 0 {
		return 0
	}
	if f == 0 {
		return 1
	}
	x := l / f
	if x < 1e-3 {
		return clean(x/2 - x*x/6)
	}
	return clean(1 + math.Expm1(-x)/x)
}
