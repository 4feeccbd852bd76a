package top

import (
	"math"
	"testing"
)

func TestParseSample(t *testing.T) {
	s, err := parseSample(`m{a="x\"y",b="1\\2", c="\n"} 1.5e3 1700000000`)
	if err != nil || s.Name != "m" || s.Labels["a"] != `x"y` || s.Labels["b"] != `1\2` || s.Labels["c"] != "\n" || s.Value != 1500 {
		t.Fatalf("%+v %v", s, err)
	}
	s, err = parseSample("m +Inf")
	if err != nil || !math.IsInf(s.Value, 1) {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{"m", `m{a="x} 1`, `m{a=x} 1`, "m{a=\"x\"} one"} {
		if _, err := parseSample(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := histogram{bounds: []float64{0.1, 0.5, 1, math.Inf(1)}, counts: []float64{50, 80, 90, 100}, count: 100, sum: 40}
	if v, inf, ok := h.quantile(0.5); !ok || inf || v != 0.1 {
		t.Fatalf("p50 %v %v %v", v, inf, ok)
	}
	if v, _, _ := h.quantile(0.65); math.Abs(v-0.3) > 1e-9 {
		t.Fatalf("p65 %v", v)
	}
	if v, inf, _ := h.quantile(0.95); !inf || v != 1 {
		t.Fatalf("p95 %v %v", v, inf)
	}
	if v, ok := h.shareAbove(1); !ok || math.Abs(v-0.1) > 1e-9 {
		t.Fatalf("share above 1: %v", v)
	}
	if _, _, ok := (histogram{}).quantile(0.5); ok {
		t.Fatal("an empty histogram has a quantile")
	}
	// A counter reset (worker restart) falls back to the current values.
	d := h.sub(histogram{bounds: h.bounds, counts: []float64{60, 90, 100, 200}, count: 200})
	if d.count != 100 {
		t.Fatalf("sub across a reset %+v", d)
	}
}
