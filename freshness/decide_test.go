package freshness

import "testing"

// Decide's bounds come from what the key's route resolved to: the route's min_interval (never
// above the cadence) else cadence ÷ MinIntervalDiv; the ceiling at the route's interval (never
// below the cadence), stretched by a tuning's route stretch up to MaxCadenceMs, whose threshold
// replaces the configuration's.
func TestDecideTakesItsBoundsFromTheResolvedInputs(t *testing.T) {
	const hour = 3_600_000
	in := Inputs{Route: "shop", RouteIntervalMs: 4 * hour, MinIntervalDiv: 16, Threshold: 2, PriorWeight: 3,
		SweepIntervalMs: 60_000, MaxCadenceMs: 6 * hour}
	h := History{}
	p := Decide(&in, nil, 2*hour, h, 1)
	if p.MinIntervalMs != 2*hour/16 || p.MaxIntervalMs != 4*hour || p.CeilingBaseMs != 4*hour || p.Threshold != 2 {
		t.Fatalf("without a tuning or a route min_interval: %+v", p)
	}
	if p.RequestsPerHour != 1 || p.IntervalMs < p.MinIntervalMs || p.IntervalMs > p.MaxIntervalMs {
		t.Fatalf("the interval is not within its bounds: %+v", p)
	}
	in.MinIntervalMs = 3 * hour
	tu := &Tuning{Nu: 5, Stretch: map[string]float64{"shop": 4}}
	p = Decide(&in, tu, 2*hour, h, 1)
	if p.MinIntervalMs != 2*hour || p.Threshold != 5 || p.MaxIntervalMs != 6*hour || p.CeilingBaseMs != 4*hour {
		t.Fatalf("with a route min_interval over the cadence and a tuning: %+v", p)
	}
	in.ChangeIntervalMs = hour
	if got, want := ChangePrior(&in, tu, 2*hour), PriorAt(1, 2*hour, 3); got != want {
		t.Fatalf("a route's change_interval is the prior's rate: %+v, want %+v", got, want)
	}
}

// A row refiled under a shorter bound is due one bound after what filed it, or after its last
// render if that is earlier, never before the floor, and never later than it was.
func TestRefiledDue(t *testing.T) {
	const hour = 3_600_000
	for _, c := range []struct {
		name                                    string
		due, carried, bound, lastRender, minDue int64
		want                                    int64
	}{
		{"one bound after what filed it", 10 * hour, 6 * hour, hour, 0, 0, 5 * hour},
		{"after the last render when earlier", 10 * hour, 6 * hour, hour, 2 * hour, 0, 3 * hour},
		{"never before the floor", 10 * hour, 6 * hour, hour, 2 * hour, 4 * hour, 4 * hour},
		{"never later than it was", 2 * hour, hour, 3 * hour, 0, 0, 2 * hour},
	} {
		if got := RefiledDue(c.due, c.carried, c.bound, c.lastRender, c.minDue); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
