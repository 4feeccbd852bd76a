package intake

import (
	"math"
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
)

// Counted requests reach the targets' counters in one batch: a page first counted by a flush of
// no length starts at its route's prior rate, the counts move the rate with
// freshness.request_tau, the row is
// filed again as it was, and a key that is no target is dropped.
func TestDemandWritesDecayedCounts(t *testing.T) {
	e := qtest.New(t, `
freshness: {request_tau: 10h, requests: 0.5}
routes:
  - {name: home, match: exact, path: /, requests: 30}
`, start, shm.Options{})
	home, prod := "desktop|https://a.test/", "desktop|https://a.test/p/1"
	for _, k := range []string{home, prod} {
		tg := store.Target{URL: k[len("desktop|"):], Device: "desktop", Source: store.SourceSitemap}
		sch, _ := store.NewSchedule([]byte(k), start+hour, true, 0, store.Lanes{})
		if err := e.Store.WriteSchedules([]store.Write{{Schedule: sch, Target: &tg}}); err != nil {
			t.Fatal(err)
		}
	}
	rowBefore, _ := e.Store.GetSchedule([]byte(home))
	d := mustDemand(t, DemandDeps{Store: e.Store, Writer: e.Store, Locks: &KeyLocks{}, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	n, left, err := d.Write(map[string]uint32{home: 10, prod: 2, "desktop|https://a.test/unknown": 5})
	if err != nil || n != 2 || left != nil {
		t.Fatalf("write: %d %v %v", n, left, err)
	}
	rate := func(k string) float64 {
		tg, err := e.Store.GetTarget([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if tg.Fresh.RequestsAtMs != start {
			t.Fatalf("%s: counted at %d, want %d", k, tg.Fresh.RequestsAtMs, start)
		}
		set := qtest.Settings(e, IntakeSettingsOf)()
		return RequestRate(set, set.Resolve([]byte(k)), &tg.Fresh, e.Now())
	}
	// The prior as 10 h of pseudo-requests, plus the counted ones, over 10 h.
	if got, want := rate(home), (30*10+10)/10.0; math.Abs(got-want) > 1e-9 {
		t.Fatalf("home rate %v, want %v", got, want)
	}
	if got, want := rate(prod), (0.5*10+2)/10.0; math.Abs(got-want) > 1e-9 {
		t.Fatalf("product rate %v, want %v", got, want)
	}
	if r, _ := e.Store.GetSchedule([]byte(home)); r != rowBefore {
		t.Fatalf("row changed: %+v → %+v", rowBefore, r)
	}
	if _, err := e.Store.GetTarget([]byte("desktop|https://a.test/unknown")); err == nil {
		t.Fatal("a key that is no target got one")
	}
	// Ten hours later, one time constant (the page's 32 requests would take longer): the rate
	// moves 1 − 1/e of the way from 0.7 to the 0.4 an hour the 4 requests counted over those
	// 10 hours; the count is the rate times tau.
	e.Advance(10 * hour)
	if _, _, err := d.Write(map[string]uint32{prod: 4}); err != nil {
		t.Fatal(err)
	}
	tg, _ := e.Store.GetTarget([]byte(prod))
	if want := ((0.5*10+2)/10/math.E + 0.4*(1-1/math.E)) * 10; math.Abs(tg.Fresh.Requests-want) > 1e-9 {
		t.Fatalf("decayed count %v, want %v", tg.Fresh.Requests, want)
	}
	// A target never counted is its route's prior.
	set := qtest.Settings(e, IntakeSettingsOf)()
	if got := RequestRate(set, set.Resolve([]byte(home)), &store.Freshness{}, e.Now()); got != 30 {
		t.Fatalf("a never-counted home page's rate %v, want the route's 30", got)
	}
}
