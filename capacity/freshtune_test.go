package capacity

import (
	"context"
	"github.com/freshq/freshq/assemble"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// TestServiceTunesFreshness: under queue.policy freshness a recount hands every row with its
// target to the tuner's Page and publishes the tuning once the meter has a whole window;
// before that, and under ready, the cell stays empty (the configuration's threshold applies).
func TestServiceTunesFreshness(t *testing.T) {
	for _, policyName := range []string{config.PolicyFreshness, "ready"} {
		cfg, err := config.Parse([]byte("queue: {policy: " + policyName + "}\nroutes:\n  - {name: catalog, match: prefix, path: /c/, interval: 24h}\n"))
		if err != nil {
			t.Fatal(err)
		}
		pol, err := assemble.Policy(cfg)
		if err != nil {
			t.Fatal(err)
		}
		raw := openStore(t)
		now := int64(1_700_000_000_000)
		keys := []string{"desktop|https://example.test/c/1", "desktop|https://example.test/c/2"}
		for _, k := range keys {
			sch, _ := store.NewSchedule([]byte(k), now, false, 0, store.Lanes{})
			if err := raw.WriteSchedules([]store.Write{{Schedule: sch, Target: &store.Target{URL: "https://example.test/c", Device: "desktop", Source: store.SourceDiscovered}}}); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]bool{}
		cell := &freshness.TuningCell{}
		s := NewService(raw, func() *policy.Policy { return pol }, func() int64 { return now }, func() uint64 { return 100 }, zerolog.Nop())
		on := policyName == config.PolicyFreshness
		s.Freshness = &FreshTuner{Cell: cell, Settings: func() FreshSettings {
			return FreshSettings{On: on, SweepMs: cfg.Queue.Ready.SweepInterval.Ms()}
		}, Page: func(key []byte, _ store.Row, _ *store.Target, _ int64) (FreshPage, bool) {
			seen[string(key)] = true
			return FreshPage{Route: "catalog", Lambda: 0.1, Mu: 1, CadenceMs: 24 * hourMs, MinIntervalMs: 90 * 60_000,
				History: freshness.History{Changed: 1, ChangedHours: 24, UnchangedHours: 24}}, true
		}}
		s.Recount()
		if cell.Load() != nil {
			t.Fatalf("%s: tuned before the meter had a window: %+v", policyName, cell.Load())
		}
		for i := range 100 {
			s.Meter.Record(now-MeterWindow+int64(i)*9_000, KindCadence)
		}
		s.Recount()
		tu := cell.Load()
		if policyName != config.PolicyFreshness {
			if tu != nil || len(seen) > 0 {
				t.Fatalf("ready: tuned %+v, pages read %v", tu, seen)
			}
			continue
		}
		if tu == nil || len(seen) != len(keys) {
			t.Fatalf("freshness: tuning %+v after a full window, pages read %v", tu, seen)
		}
		if !(tu.Nu >= 0) || tu.StretchFor("catalog") != 1 {
			t.Fatalf("freshness: ν %v and catalog's ceiling %v× with capacity to spare", tu.Nu, tu.StretchFor("catalog"))
		}
		// The Applier's prior reads the route's pooled change rate from the published tuning.
		if r, ok := tu.RouteRateFor("catalog"); !ok || !(r > 0) {
			t.Fatalf("freshness: the published tuning has no pooled change rate for catalog (%v, %v): %+v", r, ok, tu)
		}
	}
}

// TestTapPagesKeepsShardedSource: in a cluster the recount reads only the node's shards
// (ShardedSource); tapping it for the freshness tuning keeps it sharded and hands the tuner
// the rows of those shards with their targets.
func TestTapPagesKeepsShardedSource(t *testing.T) {
	raw := openStore(t)
	now := int64(1_700_000_000_000)
	var keys []string
	for i := range 8 {
		k := "desktop|https://example.test/c/" + string(rune('a'+i))
		keys = append(keys, k)
		sch, _ := store.NewSchedule([]byte(k), now, false, 0, store.Lanes{})
		tgt := &store.Target{URL: "https://example.test/c", Device: "desktop", Source: store.SourceDiscovered}
		if err := raw.WriteSchedules([]store.Write{{Schedule: sch, Target: tgt}}); err != nil {
			t.Fatal(err)
		}
	}
	shard := shardOf(4)
	src := &shardedSource{t: t, st: raw, shard: shard, held: []int32{shard([]byte(keys[0]))}}
	seen := map[string]bool{}
	tapped := tapPages(src, func(key []byte, _ store.Row, tgt *store.Target) {
		if tgt == nil {
			t.Errorf("%s handed without its target", key)
		}
		seen[string(key)] = true
	})
	if _, ok := tapped.(ShardedSource); !ok {
		t.Fatal("tapping a sharded source hid its shards: the recount would read every row")
	}
	l := NewLedger(func() *policy.Policy { return testPolicy(t) })
	l.SetShards(shard, func() []int32 { return src.held })
	if _, err := l.RecountContext(context.Background(), tapped, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, k := range keys {
		if shard([]byte(k)) == src.held[0] {
			want++
			if !seen[k] {
				t.Errorf("%s of a held shard not handed to the tuner", k)
			}
		}
	}
	if len(seen) != want || want == 0 {
		t.Errorf("handed %d rows, want the %d of the held shard", len(seen), want)
	}
}
