package apply

import (
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// A 304 to a conditional check is applied as "unchanged, verified now" while the page's bounds
// allow a check: an unchanged observation, the stored page's time refreshed, no render counted;
// once conditional_every − 1 checks were answered since the last full render, worker 0 says
// render in full, and a 304 claimed anyway is refused (applied as a failure, page kept).
func TestConditionalCheck(t *testing.T) {
	e := qtest.New(t, "freshness: {conditional_every: 3}", start, shm.Options{})
	key := []byte("desktop|https://a.test/p")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	var told []bool
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now,
		Conditional: func(applied bool) { told = append(told, applied) }})
	tg := mustTargets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	apply := func(r wire.Result) {
		t.Helper()
		r.Key, r.Lease = key, grant(t, e, key)
		if st, err := a.Apply([]wire.Result{r}); err != nil || st.Applied != 1 {
			t.Fatalf("apply: %+v %v", st, err)
		}
		e.Advance(hour)
	}
	if v, err := tg.Validators(key); err != nil || v.Check {
		t.Fatalf("never rendered: %+v %v, want no check", v, err)
	}
	apply(wire.Result{Outcome: "ok", Status: 200, Body: []byte("<p>x</p>"), Headers: map[string]string{"etag": `"a"`}})
	rendered := start
	for i := range 2 {
		v, err := tg.Validators(key)
		if err != nil || !v.Check || v.ETag != `"a"` {
			t.Fatalf("check %d: %+v %v, want a check with the etag", i, v, err)
		}
		apply(wire.Result{Outcome: "ok", Status: 304})
		pg, _ := e.Store.GetPage(key)
		target, _ := e.Store.GetTarget(key)
		if pg.RenderedAtMs != e.Now()-hour || string(pg.Body) != "<p>x</p>" {
			t.Fatalf("check %d: page %+v, want the body kept and its time refreshed", i, pg)
		}
		if target.Fresh.Conditional != uint32(i+1) || target.Fresh.UnchangedHours != float64(i+1) || target.LastRender.AtMs != rendered {
			t.Fatalf("check %d: %+v, want one more unchanged hour and check, the last render kept", i, target)
		}
	}
	if v, _ := tg.Validators(key); v.Check {
		t.Fatal("after conditional_every − 1 checks, a check is still allowed")
	}
	apply(wire.Result{Outcome: "ok", Status: 304})
	pg, _ := e.Store.GetPage(key)
	target, _ := e.Store.GetTarget(key)
	if pg.RenderedAtMs == e.Now()-hour || target.Failures.Count != 1 || target.Fresh.Conditional != 2 {
		t.Fatalf("a 304 past the bound was applied: page at %d, target %+v", pg.RenderedAtMs, target)
	}
	if len(told) != 3 || !told[0] || !told[1] || told[2] {
		t.Fatalf("told %v, want applied, applied, refused", told)
	}
	// A 304 with a body, or with another outcome, is no answer to a check.
	if field, err := a.Validate([]wire.Result{{Key: key, Outcome: "ok", Status: 304, Body: []byte("x"), Lease: grant(t, e, key)}}); field != "results[0].status" || err == nil {
		t.Fatalf("a 304 with a body: %q %v", field, err)
	}
}
