package settings

import (
	"testing"

	"github.com/freshq/freshq/config"
)

// The routes' settings are compiled in the policy's order, so that a key's one match finds
// its own route's: each key resolves to the route its path matches, with that route's
// settings, and a key of no route to none (every default: served stale, no expect).
func TestResolveFindsEachRoutesOwnSettings(t *testing.T) {
	cfg, err := config.Parse([]byte(`
routes:
  - {name: home, match: exact, path: /, interval: 1h, requests: 1}
  - {name: news, match: prefix, path: /news/, serve_stale: false, requests: 2, expect: {text: "news"}}
  - {name: shop, match: contains, path: /p/, requests: 3, min_interval: 7m, change_interval: 3h}
`))
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := n.Intake
	for _, tc := range []struct {
		key, name  string
		requests   float64
		serveStale bool
	}{
		{"desktop|https://a.test/", "home", 1, true},
		{"desktop|https://a.test/news/1", "news", 2, false},
		{"desktop|https://a.test/x/p/1", "shop", 3, true},
	} {
		kr := in.Resolve([]byte(tc.key))
		if kr.Policy.Name != tc.name || kr.Route == nil || kr.Route.Requests != tc.requests || kr.ServeStale() != tc.serveStale {
			t.Fatalf("%s: %+v %+v, want route %s with requests %v, serve_stale %v", tc.key, kr.Policy, kr.Route, tc.name, tc.requests, tc.serveStale)
		}
		if (kr.Expect() != nil) != (tc.name == "news") {
			t.Fatalf("%s: expect %v", tc.key, kr.Expect())
		}
	}
	if kr := in.Resolve([]byte("desktop|https://a.test/shop/1")); kr.Route != nil || kr.Policy.Index != -1 || !kr.ServeStale() || kr.Expect() != nil {
		t.Fatalf("a key of no route: %+v %+v", kr.Policy, kr.Route)
	}
	if kr := in.Resolve([]byte("desktop|https://a.test/x/p/1")); kr.Route.MinInterval.Minutes() != 7 || kr.Route.ChangeInterval.Hours() != 3 {
		t.Fatalf("shop's settings: %+v", kr.Route)
	}
}
