package capacity

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// TestServiceRecountsAtStart: rows filed before the service existed (a worker 0 restart) are
// counted by the recount it runs at start; the view projects them at the meter's capacity and
// encodes as JSON; the service keeps the startstop contract.
func TestServiceRecountsAtStart(t *testing.T) {
	pol := testPolicy(t)
	raw := openStore(t)
	now := int64(1_700_000_000_000)
	for _, k := range []string{"desktop|https://example.test/", "desktop|https://example.test/c/1", "mobile|https://example.test/c/1"} {
		sch, _ := store.NewSchedule([]byte(k), now, true, 0, store.Lanes{})
		if err := raw.WriteSchedule(sch); err != nil {
			t.Fatal(err)
		}
	}
	s := NewService(raw, func() *policy.Policy { return pol }, func() int64 { return now }, func() uint64 { return 7 }, zerolog.Nop())
	s.Stop() // before Start: a no-op
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for s.View().RecountedAtMs == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no recount at start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Two catalog rows at 24 h and the home page at 1 h.
	want := 1000 * (2/(24.0*hourMs) + 1/float64(hourMs))
	v := s.View()
	if v.Demand.Rows != 3 || math.Abs(v.Demand.Total-want) > 1e-15 || math.Abs(v.RecountDrift-want) > 1e-15 {
		t.Fatalf("view %+v, want 3 rows, %v renders/s, all of it drift from the empty ledger", v.Demand, want)
	}
	if v.Projection.Backlog != 7 || v.Projection.DrainSeconds != -1 || v.Projection.Verdict == "" {
		t.Fatalf("projection without renders %+v", v.Projection)
	}
	s.Meter.Record(now, KindCadence)
	if v = s.View(); v.Capacity.PerSecond <= 0 {
		t.Fatalf("a render: %+v", v.Capacity)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatalf("the view does not encode: %v", err)
	}
	s.Stop()
	s.Stop()
}

// TestRecountLogLine: the recount's one line carries its stable fields, and component once.
func TestRecountLogLine(t *testing.T) {
	pol := testPolicy(t)
	raw := openStore(t)
	sch, _ := store.NewSchedule([]byte("desktop|https://example.test/"), 1, true, 0, store.Lanes{})
	if err := raw.WriteSchedule(sch); err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	s := NewService(raw, func() *policy.Policy { return pol }, func() int64 { return 1 }, nil, zerolog.New(&buf))
	recount := func() map[string]any {
		t.Helper()
		buf.Reset()
		s.Recount()
		line := strings.TrimSpace(buf.String())
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || strings.Count(line, "\n") != 0 {
			t.Fatalf("not one JSON line: %q", line)
		}
		if m["message"] != "capacity recount" || strings.Count(line, `"component"`) != 1 || m["drift_renders_per_second"] == nil {
			t.Fatalf("log line %s", line)
		}
		return m
	}
	// The first recount (at start) finds the stored rows the ledger has not seen: not a drift.
	if m := recount(); m["level"] != "info" || m["first"] != true || m["rows"] != 1.0 || m["rows_differing"] != 1.0 || m["demand_incremental"] != 0.0 {
		t.Fatalf("first recount: %v", m)
	}
	// A row written past the ledger afterwards is one.
	sch2, _ := store.NewSchedule([]byte("desktop|https://example.test/c/x"), 1, true, 0, store.Lanes{})
	if err := raw.WriteSchedule(sch2); err != nil {
		t.Fatal(err)
	}
	if m := recount(); m["level"] != "warn" || m["first"] != false || m["rows"] != 2.0 || m["rows_differing"] != 1.0 || m["demand_incremental"] == 0.0 {
		t.Fatalf("second recount: %v", m)
	}
}
