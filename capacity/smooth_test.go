package capacity

import (
	"fmt"
	"math"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// TestSmoothStretchStep: the stretch a tuning files follows a step of the projection with the
// time constant StretchTauMs, whatever the tunings' period: from 1 to 2, it is 1 + (1 −
// e^{−t/τ}) t after the step (golden values), and tuning every 4 hours or once reaches the
// same value. A route the previous tuning lacked takes the projection as it is; one the
// projection lacks is dropped.
func TestSmoothStretchStep(t *testing.T) {
	const h = 3_600_000
	want := map[int64]string{0: "1.0000", 4: "1.0488", 40: "1.3935", 80: "1.6321", 240: "1.9502"}
	s := map[string]float64{"p": 1}
	for hours := int64(0); hours <= 240; hours += 4 {
		if w, ok := want[hours]; ok {
			if got := fmt.Sprintf("%.4f", s["p"]); got != w {
				t.Errorf("%d h after the step: stretch %s, want %s", hours, got, w)
			}
		}
		s = SmoothStretch(s, map[string]float64{"p": 2}, 4*h)
	}
	once := SmoothStretch(map[string]float64{"p": 1}, map[string]float64{"p": 2}, 80*h)
	if math.Abs(once["p"]-(2-math.Exp(-1))) > 1e-12 {
		t.Errorf("one tuning 80 h after the step: %v, want %v", once["p"], 2-math.Exp(-1))
	}
	got := SmoothStretch(map[string]float64{"gone": 3, "p": 1.5}, map[string]float64{"p": 1.5, "new": 1.25}, 4*h)
	if len(got) != 2 || got["p"] != 1.5 || got["new"] != 1.25 {
		t.Errorf("routes: %v, want p 1.5 (steady), new 1.25 (as projected), gone dropped", got)
	}
	if first := SmoothStretch(nil, map[string]float64{"p": 2}, 0); first["p"] != 2 {
		t.Errorf("the first tuning filed %v, want the projection 2", first["p"])
	}
}

// TestTuneFreshnessSmoothsAndPlansWithIt: TuneFreshness files the stretch smoothed from the
// previous tuning's (PrevStretch, PrevAtMs) and plans ν with the ceilings it files: at half
// the demand's capacity, saturated, the raw projection stretches catalog past 1; a previous
// stretch of 1 filed just now holds it at 1, an old one lets the projection through.
func TestTuneFreshnessSmoothsAndPlansWithIt(t *testing.T) {
	in := halfCapacityInput()
	raw, ok := TuneFreshness(in)
	if !ok || !(raw.StretchFor("catalog") > 1.1) {
		t.Fatalf("raw: ok %v, catalog stretch %v: want a projection past 1.1", ok, raw.StretchFor("catalog"))
	}
	in.PrevStretch, in.PrevAtMs, in.NowMs = map[string]float64{"catalog": 1, "product": 1}, 1_000, 1_000
	held, _ := TuneFreshness(in)
	if held.StretchFor("catalog") != 1 || held.StretchFor("product") != 1 {
		t.Errorf("a stretch of 1 filed just now became %v", held.Stretch)
	}
	if !(held.Nu > raw.Nu) {
		t.Errorf("ν %v with ceilings at the cadence, %v with the projected ones: shorter ceilings must leave less for ν", held.Nu, raw.Nu)
	}
	in.NowMs = in.PrevAtMs + 100*StretchTauMs
	old, _ := TuneFreshness(in)
	if math.Abs(old.StretchFor("catalog")-raw.StretchFor("catalog")) > 1e-9 {
		t.Errorf("a stretch filed 100 τ ago kept catalog at %v, want the projection %v", old.StretchFor("catalog"), raw.StretchFor("catalog"))
	}
}

// TestTuneFreshnessCeilingBase: a page's ceiling stretches its CeilingBaseMs (its route's
// interval) rather than its cadence: pages at a 12-hour rung of a 48-hour route, whose
// stretched 12-hour ceilings alone would ask for more than the budget (ν at MaxThreshold),
// leave part of it to ν at their route's interval.
func TestTuneFreshnessCeilingBase(t *testing.T) {
	in := halfCapacityInput()
	for i := range in.Pages {
		in.Pages[i].CadenceMs = 12 * hourMs
	}
	rung, _ := TuneFreshness(in)
	for i := range in.Pages {
		in.Pages[i].CeilingBaseMs = 48 * hourMs
	}
	route, _ := TuneFreshness(in)
	if rung.Nu != freshness.MaxThreshold || !(route.Nu < freshness.MaxThreshold) {
		t.Errorf("ν %v at the rung's ceilings, %v at the route's: want every page at its rung's ceiling, and room at the route's", rung.Nu, route.Nu)
	}
}

// halfCapacityInput is testdata/tune's saturated case: half the demand's capacity, a backlog.
func halfCapacityInput() FreshInput {
	in := FreshInput{Boost: 2, SweepMs: hourMs, Backlog: 5000,
		Measured: Capacity{PerSecond: 0.0000174, WindowMs: MeterWindow, Renders: 1000}}
	for _, c := range []Class{{Route: "product", Lane: policy.LaneDiscovered, PerSecond: 0.000005785},
		{Route: "product", Lane: policy.LaneSubmitted, Submitted: true, PerSecond: 0.000005785}, {Route: "catalog", Lane: policy.LaneSubmitted, Submitted: true, PerSecond: 0.00002315}} {
		in.Demand.Classes = append(in.Demand.Classes, c)
		in.Demand.Total += c.PerSecond
	}
	in.Pages = []FreshPage{{Route: "product", Lambda: 0.1, Mu: 2, CadenceMs: 48 * hourMs, MinIntervalMs: 3 * hourMs},
		{Route: "product", Lambda: 0.001, Mu: 0.01, CadenceMs: 48 * hourMs, MinIntervalMs: 3 * hourMs},
		{Route: "catalog", Lambda: 0.5, Mu: 5, CadenceMs: 24 * hourMs, MinIntervalMs: 90 * 60_000},
		{Route: "catalog", Lambda: 0, Mu: 1, CadenceMs: 24 * hourMs, MinIntervalMs: 90 * 60_000}}
	return in
}

// TestServiceKeepsTheFiledStretch: worker 0's tuner files the stretch smoothed from its own
// previous tuning (FreshTuner keeps it in memory). Two catalog rows at a one-minute cadence
// ask for more than a meter of one render a window: the route is stretched. A recount at the
// same instant, after the meter measured a hundredfold, files that stretch unchanged (no time
// has passed); one a hundred time constants later files the projection, 1.
func TestServiceKeepsTheFiledStretch(t *testing.T) {
	raw := openStore(t)
	now := int64(1_700_000_000_000)
	for _, k := range []string{"desktop|https://example.test/c/1", "desktop|https://example.test/c/2"} {
		sch, _ := store.NewSchedule([]byte(k), now, false, 60_000, store.Lanes{})
		if err := raw.WriteSchedules([]store.Write{{Schedule: sch, Target: &store.Target{URL: "https://example.test/c", Device: "desktop", Source: store.SourceDiscovered}}}); err != nil {
			t.Fatal(err)
		}
	}
	pol := testPolicy(t)
	cell := &freshness.TuningCell{}
	s := NewService(raw, func() *policy.Policy { return pol }, func() int64 { return now }, func() uint64 { return 1000 }, zerolog.Nop())
	s.Freshness = &FreshTuner{Cell: cell, Settings: func() FreshSettings { return FreshSettings{On: true, SweepMs: hourMs} },
		Page: func(key []byte, _ store.Row, _ *store.Target, _ int64) (FreshPage, bool) {
			return FreshPage{Route: "catalog", Lambda: 0.1, Mu: 1, CadenceMs: 60_000, MinIntervalMs: 60_000}, true
		}}
	measure := func(renders int) {
		for i := range renders {
			s.Meter.Record(now-MeterWindow+meterBucketMs+int64(i)*((MeterWindow-meterBucketMs)/int64(renders)), KindCadence)
		}
	}
	catalog := func() float64 {
		t.Helper()
		s.Recount()
		tu := cell.Load()
		if tu == nil {
			t.Fatal("no tuning")
		}
		return tu.StretchFor("catalog")
	}
	measure(1)
	first := catalog()
	if !(first > 2) {
		t.Fatalf("catalog stretched %v× at a render a window: want more than 2", first)
	}
	measure(100)
	if again := catalog(); again != first {
		t.Errorf("a recount at the same instant filed %v×, want the last tuning's %v×", again, first)
	}
	now += 100 * StretchTauMs
	measure(100)
	if later := catalog(); later != 1 {
		t.Errorf("100 τ later with capacity to spare: %v×, want 1", later)
	}
}
