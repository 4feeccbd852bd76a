package assemble

import (
	"reflect"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
)

// Every value policy decides with reaches its options: a file that sets each of them to
// something other than its default gets exactly those values, and no option is left at its
// zero value (a field added to policy.Options and forgotten here fails this test).
func TestPolicyOptionsCarryEveryValue(t *testing.T) {
	cfg, err := config.Parse([]byte(`
routes:
  - {name: home, match: exact, path: /, interval: 1h, swr: 10m}
  - {name: cat, match: prefix, path: /c/, interval: 12h, keep_params: [page]}
  - {name: prod, match: contains, path: /p/}
keys: {drop_params: [utm_source]}
page: {swr_ttl: 2h}
queue:
  ready: {submitted_boost: 3}
  lanes: {urgent_max_share: 0.3, min_share: {discovered: 0.15, cold: 0.05}}
render:
  default_interval: 36h
  demand: {ladder: [2h, 8h, 36h]}
  failure_retry: {fast_retries: 3, fast_delay: 2m, factor: 3, max_backoff: 5d, non_sitemap_penalty: 6}
  suppression:
    gone: {strikes: 4, recheck: 20d}
    noindex: {strikes: 5, recheck: 9d}
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := PolicyOptions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := cfg.KeyRules()
	if err != nil {
		t.Fatal(err)
	}
	h := time.Hour
	want := policy.Options{
		DefaultInterval: 36 * h, DefaultSWR: 2 * h,
		Routes: []policy.Route{
			{Name: "home", Match: policy.MatchExact, Path: "/", Interval: h, SWR: 10 * time.Minute},
			{Name: "cat", Match: policy.MatchPrefix, Path: "/c/", Interval: 12 * h},
			{Name: "prod", Match: policy.MatchContains, Path: "/p/"},
		},
		SubmittedBoost: 3,
		Shares:         policy.Shares{UrgentMax: 0.3, DiscoveredMin: 0.15, ColdMin: 0.05},
		Keys:           keys,
		Ladder:         []time.Duration{2 * h, 8 * h, 36 * h},
		Retry:          policy.Retry{FastRetries: 3, FastDelay: 2 * time.Minute, Factor: 3, MaxBackoff: 120 * h, NonSubmittedPenalty: 6},
		Gone:           policy.Seal{Strikes: 4, Recheck: 480 * h},
		Noindex:        policy.Seal{Strikes: 5, Recheck: 216 * h},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("policy options:\n got %+v\nwant %+v", got, want)
	}
	noZeroField(t, "policy.Options", reflect.ValueOf(got))
	for _, sub := range []any{got.Retry, got.Gone, got.Noindex, got.Shares} {
		noZeroField(t, reflect.TypeOf(sub).String(), reflect.ValueOf(sub))
	}
	// The key rules are the configuration's: the route's keep_params keeps its parameter and
	// keys.drop_params drops its own.
	if k, err := got.Keys.Normalize("https://a.test/c/x?page=2&utm_source=x&z=1"); err != nil || k != "https://a.test/c/x?page=2" {
		t.Fatalf("key rules: %q, %v", k, err)
	}
}
