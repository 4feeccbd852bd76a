package apply

import (
	"math"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// Of the requests served between two observations, none were stale when the content did not
// change; when it did, the part of the interval after the change: a half for a rare change,
// all of them as changes come many to the interval.
func TestStaleServed(t *testing.T) {
	hourObs := func(changed bool) observed { return observed{changed: changed, intervalMs: hour, served: 10} }
	if got := staleServed(hourObs(false), 5); got != 0 {
		t.Fatalf("unchanged: %v stale", got)
	}
	if got := staleServed(hourObs(true), 1e-9); math.Abs(got-5) > 1e-6 {
		t.Fatalf("a rare change: %v stale of 10, want 5", got)
	}
	if got := staleServed(hourObs(true), 1); got <= 5 || got >= 10 {
		t.Fatalf("λτ = 1: %v stale of 10, want between 5 and 10", got)
	}
	if got := staleServed(hourObs(true), 1000); math.Abs(got-10) > 0.01 {
		t.Fatalf("λτ = 1000: %v stale of 10, want all", got)
	}
}

// The Applier measures the served requests at each observation: requests counted between a
// render and an unchanged one are all fresh; between it and a changed one, some are stale.
func TestApplierMeasuresStaleServes(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	key := []byte("desktop|https://a.test/p")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	meter := &StaleMeter{}
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now, Stale: meter})
	d := mustDemand(t, intake.DemandDeps{Store: e.Store, Writer: e.Store, Locks: &intake.KeyLocks{}, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	render := func(body string) {
		t.Helper()
		if _, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte(body), Lease: grant(t, e, key)}}); err != nil {
			t.Fatal(err)
		}
		e.Advance(hour)
	}
	render("a")
	if _, _, err := d.Write(map[string]uint32{string(key): 10}); err != nil {
		t.Fatal(err)
	}
	render("a")
	if served, stale := meter.Totals(); served != 10 || stale != 0 {
		t.Fatalf("unchanged: %v served, %v stale; want 10, 0", served, stale)
	}
	if _, _, err := d.Write(map[string]uint32{string(key): 4}); err != nil {
		t.Fatal(err)
	}
	render("b")
	if served, stale := meter.Totals(); served != 14 || stale < 2 || stale > 4 {
		t.Fatalf("changed: %v served, %v stale; want 14, 2..4", served, stale)
	}
}
