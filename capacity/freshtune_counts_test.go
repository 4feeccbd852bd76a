package capacity

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// A tuning starts once the meter has counted enough renders, not after a whole window: two
// minutes after a start at 3 renders a second (360 renders), TuneFreshness tunes, with the
// capacity of those two minutes; at 50 renders in two minutes it does not (the capacity is not
// known well enough), and a whole window with any render still tunes as before.
func TestTuneFreshnessStartsOnCounts(t *testing.T) {
	start := int64(1_700_000_000_000)
	pages := []FreshPage{
		{Route: "c", Lambda: 10, Mu: 100, CadenceMs: 60_000, MinIntervalMs: 3_750},
		{Route: "c", Lambda: 0.01, Mu: 100, CadenceMs: 60_000, MinIntervalMs: 3_750},
	}
	tune := func(renders int, span int64) (FreshTuning, bool) {
		m := &Meter{}
		for i := range renders {
			m.Record(start+int64(i)*span/int64(renders), KindCadence)
		}
		now := start + span
		return TuneFreshness(FreshInput{Measured: m.Rate(now), Boost: 1, Backlog: 1000, SweepMs: 1000, NowMs: now, Pages: pages})
	}
	tu, ok := tune(360, 2*60_000)
	if !ok {
		t.Fatalf("360 renders in two minutes: not tuned; want a tuning once %d renders are counted", TuneMinRenders)
	}
	if tu.PerSecond < 2.9 || tu.PerSecond > 3.1 {
		t.Fatalf("planned with %.2f renders/s, want the 3/s the two minutes measured", tu.PerSecond)
	}
	if _, ok := tune(50, 2*60_000); ok {
		t.Fatal("50 renders in two minutes: tuned; the capacity is not measured well enough")
	}
	if _, ok := tune(20, MeterWindow); !ok {
		t.Fatal("a whole window with 20 renders: not tuned")
	}
}

// Until its first tuning, a Service under queue.policy freshness recounts every
// UntunedRecountEvery (the tuning rides on the recount), then at twice that after each tuning,
// up to its period; without the policy it keeps its period.
func TestServiceRecountsSoonUntilTuned(t *testing.T) {
	now := int64(1_700_000_000_000)
	cfg, err := config.Parse([]byte("routes:\n  - {name: c, match: prefix, path: /c/, interval: 1m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := assemble.Policy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pol := func() *policy.Policy { return p }
	for _, on := range []bool{true, false} {
		s := NewService(openStore(t), pol, func() int64 { return now }, func() uint64 { return 100 }, zerolog.Nop())
		s.Freshness = &FreshTuner{Cell: &freshness.TuningCell{}, Settings: func() FreshSettings { return FreshSettings{On: on, SweepMs: 1000} },
			Page: func([]byte, store.Row, *store.Target, int64) (FreshPage, bool) { return FreshPage{}, false }}
		every := 10 * time.Minute
		want := every
		if on {
			want = UntunedRecountEvery
		}
		if got := s.nextRecount(every); got != want {
			t.Fatalf("policy on %v, untuned: next recount in %v, want %v", on, got, want)
		}
		for i := range TuneMinRenders {
			s.Meter.Record(now-60_000+int64(i)*100, KindCadence)
		}
		s.Recount()
		if on && s.Freshness.Cell.Load() == nil {
			t.Fatalf("not tuned after %d renders", TuneMinRenders)
		}
		want = every
		if on {
			want = 2 * UntunedRecountEvery
		}
		if got := s.nextRecount(every); got != want {
			t.Fatalf("policy on %v, after the first tuning: next recount in %v, want %v", on, got, want)
		}
		for range 6 {
			s.Recount()
		}
		if got := s.nextRecount(every); got != every {
			t.Fatalf("policy on %v, after seven tunings: next recount in %v, want the period %v", on, got, every)
		}
	}
}
