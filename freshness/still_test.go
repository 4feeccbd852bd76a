package freshness

import "testing"

// Under scarcity, where ready's longest interval (the tuned ceiling) already takes the whole
// capacity (ν at MaxThreshold: every row is filed at its ceiling), a page seen unchanged at
// every render over at least its route's interval is still: its ceiling is StillStretchFactor
// times its route's, so its renders go to the pages that change. A page seen changing, one not yet observed over an interval, and every page
// while the tuned stretch is 1 (ready keeps the route's interval) or before any tuning keep
// the route's ceiling.
func TestStillPageIsDueLaterUnderScarcity(t *testing.T) {
	const minute = 60_000
	in := Inputs{Route: "c", RouteIntervalMs: minute, MinIntervalDiv: 16, Threshold: 1, PriorWeight: 1,
		SweepIntervalMs: 1000, MaxCadenceMs: 365 * 24 * 60 * minute}
	scarce := &Tuning{Nu: MaxThreshold, Stretch: map[string]float64{"c": 2.6}}
	ample := &Tuning{Nu: MaxThreshold, Stretch: map[string]float64{"c": 1}}
	still := History{UnchangedHours: 3.0 / 60}              // unchanged over 3 minutes
	brief := History{UnchangedHours: 0.5 / 60}              // unchanged over 30 s: less than an interval
	changing := History{Changed: 1, ChangedHours: 3.0 / 60} // changed once in 3 minutes
	ceiling := int64(2.6*minute) - 1000                     // ready's longest, less the sweep's lead
	stillCeiling := int64(2.6*StillStretchFactor*minute) - 1000
	for _, c := range []struct {
		name string
		tu   *Tuning
		h    History
		want int64
	}{
		{"still, scarce", scarce, still, stillCeiling},
		{"changing, scarce", scarce, changing, ceiling},
		{"unchanged less than an interval, scarce", scarce, brief, ceiling},
		{"never observed, scarce", scarce, History{}, ceiling},
		{"still, capacity suffices", ample, still, minute - 1000},
		{"still, no tuning yet", nil, still, minute - 1000},
	} {
		p := Decide(&in, c.tu, minute, c.h, 30)
		if p.IntervalMs != c.want {
			t.Errorf("%s: due %d ms after its render (ceiling %d ms), want %d", c.name, p.IntervalMs, p.MaxIntervalMs, c.want)
		}
		if p.RankIntervalMs != minute {
			t.Errorf("%s: filed at its ceiling with rank interval %d ms, want the route's interval", c.name, p.RankIntervalMs)
		}
	}
}
