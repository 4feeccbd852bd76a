package intake

import (
	"math"
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
)

// A new site's pages are at their own request rates from their first flush, under the default
// time constant of a day and a prior of a tenth of a request an hour: a page asked 50 times in
// the minute since the previous flush reads 3,000 an hour, and the next minute's 40 move it at
// the page's own time scale (32 requests: about 38 s at 3,000 an hour), not a day's.
func TestDemandFirstFlushIsTheRate(t *testing.T) {
	e := qtest.New(t, `freshness: {requests: 0.1}`, start, shm.Options{})
	k := "desktop|https://a.test/p/1"
	tg := store.Target{URL: k[len("desktop|"):], Device: "desktop", Source: store.SourceSitemap}
	sch, _ := store.NewSchedule([]byte(k), start+hour, true, 0, store.Lanes{})
	if err := e.Store.WriteSchedules([]store.Write{{Schedule: sch, Target: &tg}}); err != nil {
		t.Fatal(err)
	}
	settings := qtest.Settings(e, IntakeSettingsOf)
	d := mustDemand(t, DemandDeps{Store: e.Store, Writer: e.Store, Locks: &KeyLocks{}, Settings: settings, Now: e.Now})
	rate := func() float64 {
		tg, err := e.Store.GetTarget([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		set := settings()
		return RequestRate(set, set.Resolve([]byte(k)), &tg.Fresh, e.Now())
	}
	e.Advance(60_000)
	if _, _, err := d.Write(map[string]uint32{k: 50}); err != nil {
		t.Fatal(err)
	}
	if got := rate(); math.Abs(got-3_000) > 1e-6 {
		t.Fatalf("50 requests in the first minute: rate %.2f an hour, want 3000", got)
	}
	e.Advance(60_000)
	if _, _, err := d.Write(map[string]uint32{k: 40}); err != nil {
		t.Fatal(err)
	}
	// 40 − √40 = 33.7 in a minute says at least 2,021 an hour; the rate, 3,000, is larger: a
	// time scale of 32/3000 h = 38.4 s, and the rate moves 1 − e^{−60/38.4} of the way to 2,400.
	w := 1 - math.Exp(-60/38.4)
	if got, want := rate(), 3_000*(1-w)+2_400*w; math.Abs(got-want) > 1e-6 {
		t.Fatalf("40 more the next minute: rate %.2f an hour, want %.2f", got, want)
	}
}

// A flush with no counts still starts the next one's window: a site asked nothing for its first
// hour, then 50 times in a minute, reads 3,000 an hour, not 50 over the hour. (Worker 0's flush
// calls Write with no counts too.)
func TestDemandQuietFlushStartsTheWindow(t *testing.T) {
	e := qtest.New(t, `freshness: {requests: 0.1}`, start, shm.Options{})
	k := "desktop|https://a.test/p/1"
	tg := store.Target{URL: k[len("desktop|"):], Device: "desktop", Source: store.SourceSitemap}
	sch, _ := store.NewSchedule([]byte(k), start+2*hour, true, 0, store.Lanes{})
	if err := e.Store.WriteSchedules([]store.Write{{Schedule: sch, Target: &tg}}); err != nil {
		t.Fatal(err)
	}
	settings := qtest.Settings(e, IntakeSettingsOf)
	d := mustDemand(t, DemandDeps{Store: e.Store, Writer: e.Store, Locks: &KeyLocks{}, Settings: settings, Now: e.Now})
	e.Advance(hour)
	if n, _, err := d.Write(map[string]uint32{}); err != nil || n != 0 {
		t.Fatalf("a flush of nothing: %d written, %v", n, err)
	}
	e.Advance(60_000)
	if _, _, err := d.Write(map[string]uint32{k: 50}); err != nil {
		t.Fatal(err)
	}
	got, err := e.Store.GetTarget([]byte(k))
	if err != nil {
		t.Fatal(err)
	}
	set := settings()
	if r := RequestRate(set, set.Resolve([]byte(k)), &got.Fresh, e.Now()); math.Abs(r-3_000) > 1e-6 {
		t.Fatalf("50 requests in the minute after a quiet hour: rate %.2f an hour, want 3000", r)
	}
}
