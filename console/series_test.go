package console

import (
	"strings"
	"testing"
)

// The ring keeps the last SeriesLen minutes, one sample a minute (a second sample in a minute
// replaces the first, one from an earlier minute is dropped), oldest first.
func TestRingKeepsTheLastDayByMinute(t *testing.T) {
	r := NewRing()
	if got := r.Snapshot(); len(got) != 0 {
		t.Fatalf("empty ring: %d samples", len(got))
	}
	r.Add(Sample{AtMs: 60_000 + 5, RendersPerSec: 1})
	r.Add(Sample{AtMs: 60_000 + 59_000, RendersPerSec: 2})
	r.Add(Sample{AtMs: 0, RendersPerSec: 3})
	got := r.Snapshot()
	if len(got) != 1 || got[0].AtMs != 60_000 || got[0].RendersPerSec != 2 {
		t.Fatalf("after two samples of one minute and one older: %+v", got)
	}
	for m := int64(2); m < SeriesLen+10; m++ {
		r.Add(Sample{AtMs: m * 60_000, RendersPerSec: float64(m)})
	}
	got = r.Snapshot()
	if len(got) != SeriesLen {
		t.Fatalf("%d samples, want %d", len(got), SeriesLen)
	}
	if got[0].AtMs != 10*60_000 || got[len(got)-1].AtMs != (SeriesLen+9)*60_000 {
		t.Errorf("the ring holds minutes %d..%d, want 10..%d", got[0].AtMs/60_000, got[len(got)-1].AtMs/60_000, SeriesLen+9)
	}
	for i := 1; i < len(got); i++ {
		if got[i].AtMs != got[i-1].AtMs+60_000 {
			t.Fatalf("sample %d at %d after %d: not one a minute, oldest first", i, got[i].AtMs, got[i-1].AtMs)
		}
	}
}

// The chart draws a point per lane-minute with a p90, and says so when there is none.
func TestChartHasAPointPerSampledLaneMinute(t *testing.T) {
	one, two := 1.0, -1.0
	svg := ChartSVG([]Sample{{AtMs: 0, P90: [4]*float64{&one, nil, nil, &two}}, {AtMs: 60_000, P90: [4]*float64{&one}}})
	if got := strings.Count(svg, `class="pt"`); got != 3 {
		t.Errorf("%d points, want 3", got)
	}
	if !strings.Contains(ChartSVG(nil), "no sample yet") {
		t.Error("an empty chart does not say it is empty")
	}
}
