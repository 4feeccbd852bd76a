package capacity

import (
	"math"
	"testing"

	"github.com/freshq/freshq/policy"
)

func TestMeterWindow(t *testing.T) {
	var m Meter
	t0 := int64(1_700_000_000_000)
	m.Rate(t0) // the meter starts now
	// 2 renders a second for 20 minutes, every tenth a retry and every twentieth a recheck.
	for i := range int64(2 * 20 * 60) {
		k := KindCadence
		switch {
		case i%20 == 0:
			k = KindRecheck
		case i%10 == 0:
			k = KindRetry
		}
		m.Record(t0+i*500, k)
		// Five minutes in, the window is five minutes long: the rate is not diluted by time
		// before the meter started.
		if i == 2*5*60-1 {
			if c5 := m.Rate(t0 + 5*60*1000); math.Abs(c5.PerSecond-2) > 0.05 {
				t.Fatalf("rate at 5 min %v, want 2/s", c5.PerSecond)
			}
		}
	}
	c := m.Rate(t0 + 20*60*1000)
	if math.Abs(c.PerSecond-2) > 0.01 {
		t.Fatalf("rate %v, want 2/s", c.PerSecond)
	}
	if c.WindowMs > MeterWindow || c.WindowMs < MeterWindow-meterBucketMs {
		t.Fatalf("window %d ms, want about %d", c.WindowMs, MeterWindow)
	}
	if math.Abs(c.RetryShare-0.05) > 0.005 || math.Abs(c.RecheckShare-0.05) > 0.005 {
		t.Fatalf("shares retry %v recheck %v, want 0.05 each", c.RetryShare, c.RecheckShare)
	}
	// Renders stop: an hour later nothing is left in the window.
	if c := m.Rate(t0 + 80*60*1000); c.Renders != 0 || c.PerSecond != 0 {
		t.Fatalf("an hour after the last render: %+v", c)
	}
}

func classes(cs ...Class) Demand {
	var d Demand
	for _, c := range cs {
		d.Total += c.PerSecond
		d.Classes = append(d.Classes, c)
	}
	return d
}

func TestProjectKeepingUp(t *testing.T) {
	d := classes(Class{Lane: policy.LaneSubmitted, Route: "home", Submitted: true, PerSecond: 1})
	p := Project(d, Capacity{PerSecond: 2}, 2, 3600)
	if p.ByLane["submitted"] != 1 || p.ByRoute["home"] != 1 {
		t.Fatalf("capacity twice the demand: lanes %v routes %v, want on time (1)", p.ByLane, p.ByRoute)
	}
	if p.Verdict != "keeping up" || p.DrainSeconds != 3600 {
		t.Fatalf("verdict %q drain %v, want keeping up, 3600 rows at 1/s spare = 3600 s", p.Verdict, p.DrainSeconds)
	}
}

func TestProjectFallingBehind(t *testing.T) {
	// One class at half capacity: rendered every 2 cadences. Retries take a tenth of capacity.
	d := classes(Class{Lane: policy.LaneDiscovered, Route: "p", PerSecond: 1})
	p := Project(d, Capacity{PerSecond: 1 / 0.9 / 2, RetryShare: 0.1}, 2, 100)
	if math.Abs(p.ByLane["discovered"]-2) > 1e-6 {
		t.Fatalf("half the capacity it asks for: ratio %v, want 2", p.ByLane["discovered"])
	}
	if p.DrainSeconds != -1 || p.Verdict != "falling behind by 1800 renders/h" {
		t.Fatalf("verdict %q drain %v", p.Verdict, p.DrainSeconds)
	}
	// Two classes, the submitted one boosted ×2: both are rendered at the same score S, that is
	// lateness S/2 and S, and Σ demand/(1+lateness) = capacity.
	d = classes(Class{Lane: policy.LaneSubmitted, Route: "c", Submitted: true, PerSecond: 1},
		Class{Lane: policy.LaneDiscovered, Route: "c", PerSecond: 1})
	p = Project(d, Capacity{PerSecond: 1}, 2, 0)
	s, ds := p.ByLane["submitted"]-1, p.ByLane["discovered"]-1
	if math.Abs(ds-2*s) > 1e-6 || math.Abs(1/(1+s)+1/(1+ds)-1) > 1e-6 {
		t.Fatalf("submitted %v discovered %v: want discovered lateness twice submitted's, capacity met", p.ByLane["submitted"], p.ByLane["discovered"])
	}
	// The route's renders: 1/(1+s) of the submitted pages' and 1/(1+ds) of the discovered
	// ones', whose ages average 2 ÷ (their sum) = 2 ÷ capacity.
	if r := p.ByRoute["c"]; math.Abs(r-2) > 1e-6 {
		t.Fatalf("route ratio %v, want the mean over its renders, 2", r)
	}
}

func TestProjectNothingRenders(t *testing.T) {
	p := Project(classes(Class{Lane: policy.LaneCold, PerSecond: 1}), Capacity{}, 2, 10)
	if p.DrainSeconds != -1 || p.ByLane["cold"] < 1e5 || math.IsInf(p.Utilisation, 0) {
		t.Fatalf("no capacity: %+v", p)
	}
}
