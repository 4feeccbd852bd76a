package intake

import (
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/testkit/qtest"
)

// A stored page is read under its key's route: stale past its cadence, expired past its
// cadence plus the route's swr window (page.swr_ttl without a route), and served when expired
// unless its route says serve_stale: false.
func TestStoredReadsTheKeysRoute(t *testing.T) {
	e := qtest.New(t, `
page: {swr_ttl: 1h}
routes:
  - {name: news, match: prefix, path: /news/, swr: 3h, serve_stale: false}
  - {name: shop, match: prefix, path: /shop/}
`, start, shm.Options{})
	svc := mustTargets(t, TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	const age = 3 * 3_600_000 // past the 1h cadence (putKey's) plus 1h, within 1h plus 3h
	for _, tc := range []struct {
		key                 string
		expired, serveStale bool
	}{
		{"desktop|https://a.test/news/1", false, false},
		{"desktop|https://a.test/shop/1", true, true},
		{"desktop|https://a.test/other", true, true},
	} {
		putKey(t, e.Store, tc.key, start+3_600_000, start-age)
		sp, err := svc.Stored([]byte(tc.key))
		if err != nil {
			t.Fatal(err)
		}
		if !sp.Stale || sp.Expired != tc.expired || sp.ServeStale != tc.serveStale {
			t.Errorf("%s: stale %v expired %v serve_stale %v, want stale, expired %v, serve_stale %v",
				tc.key, sp.Stale, sp.Expired, sp.ServeStale, tc.expired, tc.serveStale)
		}
	}
}
