//go:build testclock

package apply

import (
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// An applied result resolves its key's route once: its digest (the route's strip), its
// verdict (the route's expect), the policy's decision (the route's interval), the freshness
// decision and the request prior all read the one resolution. Each case goes through every
// reader: a judged render under freshness, with a route that sets all of them, first on the
// ladder (whose start the route's ceiling bounds), a later one, a conditional check's 304,
// then a failure.
func TestApplyResolvesRouteOncePerResult(t *testing.T) {
	e := qtest.New(t, `
queue: {policy: freshness}
render: {demand: {ladder: [1h, 6h, 24h]}}
routes:
  - {name: other, match: prefix, path: /other/}
  - {name: news, match: prefix, path: /news/, interval: 12h, requests: 3, min_interval: 10m,
     change_interval: 2h, strip: ['<i>[0-9]+</i>'], expect: {text: news}}
`, start, shm.Options{})
	key := []byte("desktop|https://a.test/news/1")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	etag := map[string]string{"etag": `"v1"`}
	body := "<html><body><p>a page of the news with text enough</p><i>7</i></body></html>"
	for _, r := range []wire.Result{
		{Key: key, Outcome: "ok", Status: 200, Body: []byte(body), Headers: etag},
		{Key: key, Outcome: "ok", Status: 200, Body: []byte(body + "<p>more</p>"), Headers: etag},
		{Key: key, Outcome: "ok", Status: 304, Headers: etag},
		{Key: key, Outcome: "timeout"},
	} {
		r.Lease = grant(t, e, key)
		before := policy.RouteMatches()
		if st, err := a.Apply([]wire.Result{r}); err != nil || st.Applied != 1 {
			t.Fatalf("apply %s: %+v %v", r.Outcome, st, err)
		}
		if n := policy.RouteMatches() - before; n != 1 {
			t.Errorf("applying one %s %d result matched its route %d times, want once", r.Outcome, r.Status, n)
		}
		if tg, err := e.Store.GetTarget(key); err != nil || (r.Status == 304 && tg.Fresh.Conditional != 1) {
			t.Fatalf("after the %s %d result: %+v %v (a 304 applied as one counts a check)", r.Outcome, r.Status, tg.Fresh, err)
		}
		e.Advance(hour)
	}
}
