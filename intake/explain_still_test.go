package intake

import (
	"testing"

	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
)

// GET /v1/targets says whether a page is still and what its ceiling is, so an operator asking
// why a page waits past its route's interval reads the reason: seen unchanged at every render
// over at least the route's interval, under a tuning that stretches the route's ceiling (the
// capacity short of ready's), its ceiling is StillStretchFactor times the route's; one change
// seen and it is not still, its ceiling the route's stretch.
func TestExplainSaysWhetherAPageIsStill(t *testing.T) {
	e := qtest.New(t, `
queue: {policy: freshness}
routes: [{name: p, match: prefix, path: /p/, interval: 1h}]
`, start, shm.Options{})
	set := qtest.Settings(e, IntakeSettingsOf)()
	k := []byte("desktop|https://a.test/p/1")
	kr := set.Resolve(k)
	tu := &freshness.Tuning{Nu: 0.01, Stretch: map[string]float64{"p": 1.5}}
	cadence := int64(hour)

	still := store.Freshness{UnchangedHours: 2, DigestAtMs: start}
	ex := explainFreshness(set, tu, kr, cadence, &still, start)
	if want := 1.5 * freshness.StillStretchFactor * 3600; !ex.Still || ex.MaxIntervalSec != want {
		t.Fatalf("unchanged over 2 h of a 1 h route: still %v, max_interval_seconds %.0f; want true, %.0f",
			ex.Still, ex.MaxIntervalSec, want)
	}
	changed := store.Freshness{Changed: 1, ChangedHours: 1, UnchangedHours: 2, DigestAtMs: start}
	ex = explainFreshness(set, tu, kr, cadence, &changed, start)
	if ex.Still || ex.MaxIntervalSec != 1.5*3600 {
		t.Fatalf("one change seen: still %v, max_interval_seconds %.0f; want false, 5400", ex.Still, ex.MaxIntervalSec)
	}
}
