package capacity

import (
	"math"
	"testing"

	"github.com/freshq/freshq/policy"
)

// freshness.stretch_factor scales the part of the stretch past 1: a route ready leaves at 3
// intervals gets ceilings of 5 at factor 2; a route with capacity to spare keeps its interval
// whatever the factor; an unset factor (0) and 1 keep ready's stretch.
func TestFactorStretch(t *testing.T) {
	for _, c := range []struct{ s, factor, want float64 }{
		{3, 2, 5}, {3, 1, 3}, {3, 0, 3}, {1, 4, 1}, {0.5, 4, 1}, {math.NaN(), 2, 1}, {16, 2, 31}, {16, 16, 241},
	} {
		if got := FactorStretch(c.s, c.factor); got != c.want {
			t.Errorf("FactorStretch(%v, %v) = %v, want %v", c.s, c.factor, got, c.want)
		}
	}
}

// A tuning under scarcity files the factored stretch: at three times the capacity the route's
// ceiling is about 3 intervals at factor 1 and about 5 at factor 2, and the threshold comes
// down: the longer ceilings ask for fewer renders, which the pages that change are given.
func TestTuneFreshnessStretchFactor(t *testing.T) {
	now := int64(1_700_000_000_000)
	const n, intervalMs = 300, 60_000
	d := Demand{Total: n * 1000.0 / intervalMs, Rows: n, Classes: []Class{{Lane: policy.LaneSubmitted, Route: "c", Submitted: true, Rows: n, PerSecond: n * 1000.0 / intervalMs}}}
	var pages []FreshPage
	for i := range n {
		lambda := 0.0
		if i%2 == 0 {
			lambda = 60 // once a minute
		}
		pages = append(pages, FreshPage{Route: "c", Lambda: lambda, Mu: 10 + float64(i), CadenceMs: intervalMs, CeilingBaseMs: intervalMs, MinIntervalMs: intervalMs / 16})
	}
	tune := func(factor float64) FreshTuning {
		m := &Meter{}
		for i := range 200 { // 200 renders over two minutes: a third of the demand
			m.Record(now-120_000+int64(i)*600, KindCadence)
		}
		tu, ok := TuneFreshness(FreshInput{Demand: d, Measured: m.Rate(now), Boost: 1, Backlog: n, SweepMs: 1000, NowMs: now, Pages: pages, StretchFactor: factor})
		if !ok {
			t.Fatalf("factor %v: not tuned", factor)
		}
		return tu
	}
	one, two := tune(1), tune(2)
	s1, s2 := one.StretchFor("c"), two.StretchFor("c")
	if s1 < 2.5 || s1 > 3.5 || math.Abs(s2-(1+2*(s1-1))) > 1e-9 {
		t.Fatalf("stretch %v at factor 1, %v at factor 2; want about 3, and 1 + 2·(it − 1)", s1, s2)
	}
	if !(two.Nu < one.Nu) {
		t.Fatalf("ν %v at factor 1, %v at factor 2: the longer ceilings leave the threshold nothing to give", one.Nu, two.Nu)
	}
}
