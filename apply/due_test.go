package apply

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// Keys of rows stored out of range: due 0 (1970) and past store.MaxDueMs.
const (
	legacyZero = "desktop|https://shop.test/c/zero"
	legacyFar  = "desktop|https://shop.test/c/far"
)

// newLegacyDue is worker 0's writers over a store that refuses implausible due times (as
// worker 0 opens it), holding rows an older version stored with due times out of range.
func newLegacyDue(t *testing.T) (*qtest.Env, store.Store, *intake.Targets, *Applier) {
	e := qtest.New(t, "", start, shm.Options{})
	dir := filepath.Join(t.TempDir(), "db")
	old, err := badgerstore.Open(dir, &badgerstore.Options{Floor: e.Seg.Floor()}) // an older version: no refusal
	if err != nil {
		t.Fatal(err)
	}
	for key, due := range map[string]int64{legacyZero: 0, legacyFar: store.MaxDueMs + 1} {
		sch, err := store.NewSchedule([]byte(key), due, false, 0, store.Lanes{})
		if err != nil {
			t.Fatal(err)
		}
		if err := old.WriteSchedules([]store.Write{{Schedule: sch, Target: &store.Target{URL: strings.TrimPrefix(key, "desktop|"), Device: "desktop", Source: store.SourceAPI}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(dir, &badgerstore.Options{Floor: e.Seg.Floor(), RefuseImplausibleDue: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	locks := &intake.KeyLocks{}
	return e, st, mustTargets(t, intake.TargetsDeps{Store: st, Writer: st, Deleter: st, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now}),
		newApplier(t, ApplierDeps{Store: st, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
}

// A row an older version stored with a due time out of range does not break a write that
// keeps its due time: an upload that omits due, a rush, a wait, a sitemap run's chunk and a
// result each bring it into range (due now), and the funnel's refusal never fires from them.
func TestStoredImplausibleDueIsBroughtIntoRange(t *testing.T) {
	check := func(t *testing.T, e *qtest.Env, st store.Store, step string) {
		t.Helper()
		for _, k := range []string{legacyZero, legacyFar} {
			row, err := st.GetSchedule([]byte(k))
			if err != nil {
				t.Fatal(err)
			}
			if d := row.DueAtMs; d != e.Now() {
				t.Fatalf("%s: %s due %d, want now %d", step, k, d, e.Now())
			}
		}
	}
	t.Run("upload", func(t *testing.T) {
		e, st, svc, _ := newLegacyDue(t)
		var items []wire.TargetItem
		for i := range 4 {
			items = append(items, wire.TargetItem{URL: fmt.Sprintf("https://shop.test/c/new-%d", i)})
		}
		items = append(items, wire.TargetItem{URL: "https://shop.test/c/zero", Interval: []byte(`"6h"`)}, wire.TargetItem{URL: "https://shop.test/c/far"})
		if n := upsert(t, svc, items...); n != 6 {
			t.Fatalf("upload: %d landed, want 6", n)
		}
		check(t, e, st, "a 6-item upload")
	})
	for _, mode := range []string{"rush", "wait"} {
		t.Run(mode, func(t *testing.T) {
			e, st, svc, _ := newLegacyDue(t)
			if _, err := svc.Prioritize(wire.PrioritizeRequest{Prefix: "https://shop.test/c/", Mode: mode}); err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			check(t, e, st, mode)
		})
	}
	t.Run("sitemap", func(t *testing.T) {
		e, st, svc, _ := newLegacyDue(t)
		var chunk []intake.Item
		for _, u := range []string{"https://shop.test/c/zero", "https://shop.test/c/far"} {
			p, err := intake.ParseItem(&wire.TargetItem{URL: u, Source: "sitemap"}, intake.KeyingOf(qtest.Settings(e, IntakeSettingsOf)()))
			if err != nil {
				t.Fatal(err)
			}
			chunk = append(chunk, p)
		}
		landed, err := svc.UpsertChunk(context.Background(), &intake.Gate{}, chunk)
		if err != nil || len(landed) != 2 || !landed[0].Existed || !landed[1].Existed || landed[0].Failed != "" || landed[1].Failed != "" {
			t.Fatalf("sitemap chunk: %+v %v, want both updated", landed, err)
		}
		check(t, e, st, "sitemap")
	})
	t.Run("result", func(t *testing.T) {
		e, st, _, a := newLegacyDue(t)
		var rs []wire.Result
		for _, k := range []string{legacyZero, legacyFar} {
			rs = append(rs, wire.Result{Key: []byte(k), Outcome: "ok", Status: 200, Lease: grant(t, e, []byte(k))})
		}
		if res, err := a.Apply(rs); err != nil || res.Applied != 2 {
			t.Fatalf("results: %+v %v", res, err)
		}
		for _, k := range []string{legacyZero, legacyFar} {
			row, err := st.GetSchedule([]byte(k))
			if err != nil {
				t.Fatal(err)
			}
			if d := row.DueAtMs; !store.PlausibleDue(d) || d <= e.Now() {
				t.Fatalf("%s due %d after its result", k, d)
			}
		}
	})
}
