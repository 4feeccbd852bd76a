package policy

import (
	"testing"

	"github.com/freshq/freshq/outcome"
)

// Resolve names the first route (in their order) whose match takes the key's path: its place,
// name, interval (0 when it sets none) and swr window (page.swr_ttl when it sets none), or
// none (-1, page.swr_ttl) when no route matches.
func TestResolve(t *testing.T) {
	p := testPolicy(t)
	for _, tc := range []struct {
		key  string
		want KeyRoute
	}{
		{"desktop|https://a.test/", KeyRoute{Index: 0, Name: "home", IntervalMs: hour, SWRMs: 3 * hour}},
		{"desktop|https://a.test/c/x?p=1", KeyRoute{Index: 1, Name: "catalog", IntervalMs: 24 * hour, SWRMs: 6 * hour}},
		{"desktop|https://a.test/c/p/1", KeyRoute{Index: 1, Name: "catalog", IntervalMs: 24 * hour, SWRMs: 6 * hour}}, // first match wins
		{"desktop|https://a.test/x/p/1", KeyRoute{Index: 2, Name: "product", IntervalMs: 48 * hour, SWRMs: 3 * hour}},
		{"desktop|https://a.test/blog/1", KeyRoute{Index: 3, Name: "blog", SWRMs: 3 * hour}},
		{"desktop|https://a.test/zzz", KeyRoute{Index: -1, SWRMs: 3 * hour}},
	} {
		if got := p.Resolve([]byte(tc.key)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.key, got, tc.want)
		}
	}
}

// The entry points that take a resolved route decide as the ones that resolve it themselves:
// the route's interval bounds the cadence, the ladder's start and the cadence bound.
func TestResolvedEntryPointsAgree(t *testing.T) {
	p := testPolicy(t)
	for _, key := range []string{"desktop|https://a.test/", "desktop|https://a.test/c/x", "desktop|https://a.test/blog/1", "desktop|https://a.test/zzz"} {
		kr := p.Resolve([]byte(key))
		for _, carried := range []int64{0, 30 * 60_000, 72 * hour} {
			r := Row{Key: []byte(key)}
			r.EffectiveIntervalMs = carried
			ms, o := p.Cadence(&r)
			if ms2, o2 := p.CadenceOf(&r, kr); ms2 != ms || o2 != o {
				t.Errorf("%s carried %d: CadenceOf %d %v, Cadence %d %v", key, carried, ms2, o2, ms, o)
			}
			if b, b2 := p.CadenceBound(&r), p.CadenceBoundOf(&r, kr); b != b2 {
				t.Errorf("%s: CadenceBoundOf %d, CadenceBound %d", key, b2, b)
			}
			for _, oc := range []outcome.Outcome{outcome.OK, outcome.Timeout, outcome.Gone} {
				st := State{Key: []byte(key), CarriedMs: carried}
				if d, d2 := p.Apply(st, oc, hour), p.ApplyRoute(st, kr, oc, hour); d != d2 {
					t.Errorf("%s %v: ApplyRoute %+v, Apply %+v", key, oc, d2, d)
				}
			}
		}
	}
}

// A failure carries the row's cadence clamped to its route's ceiling, as a success does: the
// row becomes self-describing under the configuration in force.
func TestApplyFailureCarriesTheRoutesCeiling(t *testing.T) {
	p := testPolicy(t)
	for _, oc := range []outcome.Outcome{outcome.OK, outcome.Timeout, outcome.Blocked} {
		st := State{Key: []byte("desktop|https://a.test/c/x"), CarriedMs: 72 * hour, StoredIntervalMs: 72 * hour}
		if d := p.Apply(st, oc, hour); d.CadenceMs != 24*hour {
			t.Errorf("%v on a catalog row carrying 72h: cadence %d, want the route's 24h", oc, d.CadenceMs)
		}
	}
}
