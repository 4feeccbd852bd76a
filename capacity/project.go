package capacity

import (
	"fmt"
	"math"

	"github.com/freshq/freshq/policy"
)

// Projection is what demand, capacity and the backlog imply under the current policy.
type Projection struct {
	// CadenceCapacity is the renders per second left for the cadences: capacity less the share
	// spent on retries and rechecks.
	CadenceCapacity float64
	// Utilisation is demand ÷ CadenceCapacity (Inf when nothing renders and something is asked).
	Utilisation float64
	// ByLane and ByRoute are the steady-state age ÷ cadence at which a page of the lane or
	// route is rendered (1 = on time; 2 = a cadence late), the mean over its renders.
	ByLane  map[string]float64
	ByRoute map[string]float64
	// LongestByRoute is, per route, the largest age ÷ cadence of its classes (lane and
	// submitted fact): the longest a page of the route waits under relative lateness, the
	// ceiling a capacity-following freshness keeps to (TuneFreshness).
	LongestByRoute map[string]float64
	// SurplusPerHour is renders per hour to spare (negative: falling behind by that many).
	SurplusPerHour float64
	// DrainSeconds is the time to render today's backlog at the surplus; -1 when it never drains.
	DrainSeconds float64
	// Verdict is "keeping up" or "falling behind by N renders/h".
	Verdict string
}

// Project computes the steady state of relative-lateness ordering for demand d at capacity c,
// with boost the submitted rows' score boost (queue.ready.submitted_boost) and backlog the due
// rows now.
//
// The model: every row is rendered when its score reaches a common threshold S, so a
// discovered row is rendered at lateness S and a submitted one at S ÷ boost, that is every
// 1 + S or 1 + S/boost of its cadences. The renders this asks for, Σ demand ÷ (1 + lateness),
// must equal the capacity left for the cadences; S = 0 when capacity covers the demand. The
// urgent lane is served first and is taken as on time. Lane floors and the urgent cap are not
// modelled (package doc).
func Project(d Demand, c Capacity, boost float64, backlog uint64) Projection {
	if boost < 1 {
		boost = 1
	}
	p := Projection{ByLane: map[string]float64{}, ByRoute: map[string]float64{}, LongestByRoute: map[string]float64{}}
	outside := min(max(c.RetryShare+c.RecheckShare, 0), 1)
	p.CadenceCapacity = c.PerSecond * (1 - outside)
	switch {
	case d.Total == 0:
		p.Utilisation = 0
	case p.CadenceCapacity == 0:
		p.Utilisation = math.Inf(1)
	default:
		p.Utilisation = d.Total / p.CadenceCapacity
	}
	s := threshold(d, p.CadenceCapacity, boost)
	lateness := func(cl Class) float64 {
		switch {
		case cl.Lane == policy.LaneUrgent:
			return 0
		case cl.Submitted:
			return s / boost
		}
		return s
	}
	// A class rendered every 1 + L of its cadences takes demand ÷ (1 + L) renders; the mean age
	// ÷ cadence over a lane's or route's renders is its demand over those renders.
	laneD, laneR, routeD, routeR := map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	for l := range policy.NumLanes {
		p.ByLane[l.String()] = 1
	}
	for _, cl := range d.Classes {
		renders := cl.PerSecond / (1 + lateness(cl))
		laneD[cl.Lane.String()] += cl.PerSecond
		laneR[cl.Lane.String()] += renders
		routeD[cl.Route] += cl.PerSecond
		routeR[cl.Route] += renders
		p.ByRoute[cl.Route] = 1
		if cl.PerSecond > 0 {
			p.LongestByRoute[cl.Route] = max(p.LongestByRoute[cl.Route], 1+lateness(cl))
		}
	}
	for name, r := range laneR {
		if r > 0 {
			p.ByLane[name] = laneD[name] / r
		}
	}
	for name, r := range routeR {
		if r > 0 {
			p.ByRoute[name] = routeD[name] / r
		}
	}
	surplus := p.CadenceCapacity - d.Total
	p.SurplusPerHour = surplus * 3600
	switch {
	case surplus > 0:
		p.DrainSeconds = float64(backlog) / surplus
		p.Verdict = "keeping up"
	case backlog == 0 && d.Total == 0:
		p.Verdict = "keeping up"
	default:
		p.DrainSeconds = -1
		p.Verdict = fmt.Sprintf("falling behind by %.0f renders/h", -p.SurplusPerHour)
	}
	if math.IsInf(p.Utilisation, 0) {
		p.Utilisation = math.MaxFloat64 // JSON has no Inf
	}
	return p
}

// maxThreshold bounds the lateness the model reports: a farm rendering nothing would otherwise
// project an infinite one.
const maxThreshold = 1e6

// threshold solves Σ demand_i ÷ (1 + lateness_i(S)) = capacity for S ≥ 0 by bisection (the left
// side decreases in S).
func threshold(d Demand, capacity, boost float64) float64 {
	asked := func(s float64) float64 {
		t := 0.0
		for _, cl := range d.Classes {
			switch {
			case cl.Lane == policy.LaneUrgent:
				t += cl.PerSecond
			case cl.Submitted:
				t += cl.PerSecond / (1 + s/boost)
			default:
				t += cl.PerSecond / (1 + s)
			}
		}
		return t
	}
	if asked(0) <= capacity {
		return 0
	}
	if asked(maxThreshold) > capacity {
		return maxThreshold
	}
	lo, hi := 0.0, maxThreshold
	for range 200 {
		mid := (lo + hi) / 2
		if asked(mid) > capacity {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}
