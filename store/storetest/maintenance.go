package storetest

import (
	"testing"

	"github.com/freshq/freshq/store"
)

func testReconcileRestoresMissingRows(t *testing.T, open Opener) {
	st := open(t, Options{})
	mk := func(i int, src store.Source, stored int64, failures uint32, rendered bool) store.Write {
		tg := sampleTarget()
		tg.Source, tg.StoredIntervalMs, tg.Failures.Count = src, stored, failures
		if !rendered {
			tg.LastRender = store.RenderSummary{}
		}
		return store.Write{Schedule: mustSchedule(t, urlKey(i), 5_000+int64(i), false, 99, store.Lanes{}), Target: &tg}
	}
	mustWrite(t, st,
		mk(0, store.SourceSitemap, 3_600_000, 0, true),
		mk(1, store.SourceDiscovered, 0, 2, true),
		mk(2, store.SourceAPI, 60_000, 0, false),
		mk(3, store.SourceDiscovered, 1, 0, true))
	// A schedule row without a target is not the reconciler's business.
	mustWrite(t, st, put(t, "no-target", 1))

	if n, err := st.Reconcile(100_000); err != nil || n != 0 {
		t.Fatalf("nothing missing: restored %d, %v", n, err)
	}
	// Lose the rows of 0, 1 and 2 behind the funnel's back.
	for i := range 3 {
		backdoor(t, st).LoseRow(t, []byte(urlKey(i)))
	}
	n, err := st.Reconcile(100_000)
	if err != nil || n != 3 {
		t.Fatalf("restored %d, %v; want 3", n, err)
	}
	want := []store.Row{
		{DueAtMs: 100_000, Projection: store.Projection{Submitted: true, EffectiveIntervalMs: 3_600_000, StoredIntervalMs: 3_600_000}},
		{DueAtMs: 100_000, Projection: store.Projection{EffectiveIntervalMs: 0, Lanes: store.Lanes{Failing: true}}},
		{DueAtMs: 100_000, Projection: store.Projection{Submitted: true, EffectiveIntervalMs: 60_000, StoredIntervalMs: 60_000, Lanes: store.Lanes{NeverRendered: true}}},
	}
	for i, w := range want {
		if r, err := st.GetSchedule([]byte(urlKey(i))); err != nil || r != w {
			t.Errorf("row %d: %+v %v, want %+v", i, r, err, w)
		}
	}
	if r, _ := st.GetSchedule([]byte(urlKey(3))); r.DueAtMs != 5_003 {
		t.Fatalf("an intact row was rewritten: %+v", r)
	}
	mustVerify(t, st)
	if n, err := st.Reconcile(200_000); err != nil || n != 0 {
		t.Fatalf("second reconcile: restored %d, %v", n, err)
	}
	if _, err := st.Reconcile(-1); !isErr(err, store.ErrInvalidArgument) {
		t.Fatalf("negative now: %v", err)
	}
}
