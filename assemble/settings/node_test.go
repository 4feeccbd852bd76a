package settings

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/crawlers"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/serve"
	"github.com/freshq/freshq/sitemap"
	"github.com/freshq/freshq/sitemapruns"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/verdict"
)

// everyValue sets every key the services read to something other than its default.
const everyValue = `
workers: 5
routes:
  - {name: home, match: exact, path: /, interval: 1h, serve_stale: false, strip: ["x-\\d+"], requests: 7,
     min_interval: 5m, change_interval: 2h, expect: {selector: "#cart", text: "Add to cart"}}
queue:
  lease_ttl: 12m
  max_remote_leases: 33
  release_grace: 9s
  policy: freshness
  claim_floor: {guard: 7m, unpin_after: 3h}
  ready: {enabled: false, capacity: 3000, sweep_cap: 123456, sweep_interval: 4m}
  lanes: {urgent_max_share: 0.1}
render:
  concurrency: 3
  timeout: 40s
  domains: [shop.test]
  user_agent: "ua/2"
  user_agents: {watch: "ua-watch/1"}
  user_agent_suffix: "site-renders/4"
  hosts: {max_concurrency: 6, overrides: {"big.test": 2}, max_pause: 4m, halve_after: 4, grow_after: 12}
page: {max_wait: 45s, max_waiters: 77, max_site_waiters: 21}
sitemap: {min_ttl: 8h, max_depth: 4, max_decompressed: 10MiB, urls: ["https://shop.test/sitemap.xml"], refetch: 6h}
serve:
  tokens: [crawler-token-1]
  mobile_agents: [Phone]
  wait: 12s
  miss_rate: 3
  miss_burst: 9
  client_ip_header: CF-Connecting-IP
  trusted_proxies: [10.0.0.0/8]
  verify: {cache_ttl: 30m}
  crawlers:
    - {family: openai, agents: [GPTBot], ranges: [192.0.2.0/24], device: mobile}
freshness:
  normalize: false
  request_tau: 12h
  requests: 0.5
  threshold: 2
  prior_weight: 3
  stretch_factor: 2
  conditional_every: 5
  conditional_max_age: 96h
verdict: {collapse_ratio: 0.5, min_text: 300, agree: 4, agree_span: 1h, keep_bytes: 8MiB}
`

func parse(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(everyValue))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func limits() hosts.Limits {
	return hosts.Limits{MaxConcurrency: 6, Overrides: map[string]int{"big.test": 2}, MaxPause: 4 * time.Minute, HalveAfter: 4, GrowAfter: 12,
		Sites: cachekey.NewSites([]string{"shop.test"})}
}

// Every value a claim and a sweep read reaches their settings: a file that sets each to
// something other than its default gets exactly those values, and no field is left zero (a
// field added and forgotten here fails).
func TestClaimAndSweepSettingsCarryEveryValue(t *testing.T) {
	cfg := parse(t)
	c := ClaimSettings(cfg)
	if want := (claim.Settings{LeaseTTL: 12 * time.Minute, ReadyEnabled: false, Hosts: limits()}); !reflect.DeepEqual(c, want) {
		t.Fatalf("claim settings:\n got %+v\nwant %+v", c, want)
	}
	s := SweepSettings(cfg)
	want := sweep.Settings{ReadyEnabled: false, Capacity: 3000, SweepCap: 123456, FloorGuard: 7 * time.Minute,
		UnpinAfter: 3 * time.Hour, RenderSlots: 4 * 3, Hosts: limits()}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("sweep settings:\n got %+v\nwant %+v", s, want)
	}
	// ReadyEnabled is false on purpose (its default is true): every other field is set.
	noZeroField(t, "claim.Settings", reflect.ValueOf(c), "ReadyEnabled")
	noZeroField(t, "sweep.Settings", reflect.ValueOf(s), "ReadyEnabled")
	if on := ClaimSettings(config.Default()); !on.ReadyEnabled || !SweepSettings(config.Default()).ReadyEnabled {
		t.Fatal("queue.ready.enabled's default (true) does not reach the claim and sweep settings")
	}
}

// Every value worker 0's services and the crawler listener read reaches their settings.
func TestIntakeAndServeSettingsCarryEveryValue(t *testing.T) {
	cfg := parse(t)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := n.Intake
	expect, err := verdict.CompileExpect("#cart", "Add to cart")
	if err != nil {
		t.Fatal(err)
	}
	want := intake.Settings{
		Policy:          n.Policy,
		Devices:         cfg.Render.DeviceNames(),
		Domains:         []string{"shop.test"},
		LeaseTTL:        12 * time.Minute,
		MaxRemoteLeases: 33,
		ReleaseGrace:    9 * time.Second,
		SweepInterval:   4 * time.Minute,
		Hosts:           limits(),
		Freshness: intake.FreshnessSettings{Policy: "freshness", On: true, Normalize: false, RequestTau: 12 * time.Hour,
			Requests: 0.5, Threshold: 2, PriorWeight: 3, StretchFactor: 2, MinIntervalDiv: config.MinIntervalDivisor, ConditionalEvery: 5,
			ConditionalMaxAge: 96 * time.Hour},
		Routes: []intake.RouteSettings{{ServeStale: false, Strip: []string{`x-\d+`}, Requests: 7,
			MinInterval: 5 * time.Minute, ChangeInterval: 2 * time.Hour, Expect: expect}},
		Verdict:   verdict.Settings{CollapseRatio: 0.5, MinText: 300, Agree: 4, AgreeSpan: time.Hour},
		KeepBytes: 8 << 20,
	}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("intake settings:\n got %+v\nwant %+v", in, want)
	}
	if !in.Devices["watch"] {
		t.Fatalf("devices %v: render.user_agents' watch is missing", in.Devices)
	}
	noZeroField(t, "intake.Settings", reflect.ValueOf(in))
	wantSitemap := sitemapruns.Settings{Keying: intake.Keying{Devices: cfg.Render.DeviceNames(), Rules: n.Policy.Keys()},
		Domains: []string{"shop.test"},
		Fetch: sitemap.Options{Domains: []string{"shop.test"}, Timeout: 40 * time.Second,
			UserAgent: "ua/2 site-renders/4", MaxDepth: 4, MaxDecompressed: 10 << 20}, MinTTL: 8 * time.Hour,
		URLs: []string{"https://shop.test/sitemap.xml"}, Refetch: 6 * time.Hour}
	if !reflect.DeepEqual(n.Sitemap, wantSitemap) {
		t.Fatalf("sitemap runs' settings:\n got %+v\nwant %+v", n.Sitemap, wantSitemap)
	}
	wantMisses := misses.Settings{Domains: []string{"shop.test"}, Sites: limits().Sites,
		Flights: 300, Waiters: 77, SiteWaiters: 21, Rate: 3, Burst: 9, MaxWait: 45 * time.Second}
	if !reflect.DeepEqual(n.Misses, wantMisses) {
		t.Fatalf("render on miss's settings:\n got %+v\nwant %+v", n.Misses, wantMisses)
	}
	for name, v := range map[string]any{"misses.Settings": n.Misses, "sitemapruns.Settings": n.Sitemap, "sitemap.Options": n.Sitemap.Fetch} {
		noZeroField(t, name, reflect.ValueOf(v))
	}
	// normalize and serve_stale are false on purpose (their defaults are true).
	noZeroField(t, "FreshnessSettings", reflect.ValueOf(in.Freshness), "Normalize")
	noZeroField(t, "RouteSettings", reflect.ValueOf(in.Routes[0]), "ServeStale")
	noZeroField(t, "verdict.Settings", reflect.ValueOf(in.Verdict))
	def := IntakeSettings(config.Default(), n.Policy)
	if def.Verdict != intake.DefaultVerdict || def.KeepBytes != intake.DefaultKeepBytes {
		t.Fatalf("verdict defaults: %+v, keep %d; want intake's defaults", def.Verdict, def.KeepBytes)
	}
	if !def.Freshness.Normalize || !def.Freshness.On || def.Freshness.Policy != config.PolicyFreshness {
		t.Fatalf("defaults: %+v", def.Freshness)
	}

	s := n.Serve
	// serve.crawlers and serve.mobile_agents are joined into the one table of User-Agent
	// patterns: the families, and mobile_agents as the device patterns.
	wantTable, err := crawlers.New([]crawlers.Spec{{Family: crawlers.OpenAI, Agents: []string{"GPTBot"}, Ranges: []string{"192.0.2.0/24"}, Device: "mobile"}},
		crawlers.DeviceSpec{Device: "mobile", Agents: []string{"Phone"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Crawlers.Device(nil, "SomePhone/1"); d != "mobile" {
		t.Fatalf("serve.mobile_agents [Phone]: a Phone's device %q", d)
	}
	if d := s.Crawlers.Device(nil, "Mozilla/5.0 (Linux; Android 14) Mobile"); d != "" {
		t.Fatalf("serve.mobile_agents [Phone] replaces the shipped patterns: an Android device %q", d)
	}
	wantServe := serve.Settings{Keying: n.Sitemap.Keying, Misses: &n.Misses, Tokens: []string{"crawler-token-1"}, Wait: 12 * time.Second,
		ClientIPHeader: "CF-Connecting-IP", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Crawlers: wantTable,
		Verify: true, VerifyRetryAfter: 1800}
	if !reflect.DeepEqual(s, wantServe) || s.Misses != &n.Misses {
		t.Fatalf("serve settings:\n got %+v\nwant %+v", s, wantServe)
	}
	noZeroField(t, "serve.Settings", reflect.ValueOf(s))
	if n.SweepInterval != 4*time.Minute {
		t.Fatalf("sweep interval %s", n.SweepInterval)
	}
	// The policy is the one assemble compiles.
	if o, err := assemble.PolicyOptions(cfg); err != nil || !reflect.DeepEqual(n.Policy.Options().Routes, o.Routes) {
		t.Fatalf("policy routes %+v, want %+v (%v)", n.Policy.Options().Routes, o.Routes, err)
	}
}

// A walk of two values from the file to where they are used, one way: read once at assembly,
// narrowed into the options of each package that uses them, and nowhere else.
func TestHostsLimitAndReadyCapacityFlowOneWay(t *testing.T) {
	cfg := parse(t)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// render.hosts.max_concurrency: the claim's host slots, the sweep's entry caps, the
	// services' token range on release and revoke (the Tracker reads the services' copy).
	for name, got := range map[string]int{"claim": n.Claim.Hosts.MaxConcurrency, "sweep": n.Sweep.Hosts.MaxConcurrency,
		"intake": n.Intake.Hosts.MaxConcurrency} {
		if got != 6 {
			t.Errorf("%s's render.hosts.max_concurrency: %d, want 6", name, got)
		}
	}
	// queue.ready.capacity: the sweep's set size, and the flights render on miss allows
	// (⌈urgent_max_share × capacity⌉ = ⌈0.1 × 3000⌉).
	if n.Sweep.Capacity != 3000 || n.Misses.Flights != 300 {
		t.Fatalf("queue.ready.capacity: sweep %d, flights %d", n.Sweep.Capacity, n.Misses.Flights)
	}
	// A reload is a new Node: the one in force is not changed under its readers.
	cfg2 := parse(t)
	cfg2.Render.Hosts.MaxConcurrency = 1
	n2, err := New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	if n.Claim.Hosts.MaxConcurrency != 6 || n2.Claim.Hosts.MaxConcurrency != 1 {
		t.Fatalf("reload: old %d, new %d", n.Claim.Hosts.MaxConcurrency, n2.Claim.Hosts.MaxConcurrency)
	}
}

func noZeroField(t *testing.T, name string, v reflect.Value, except ...string) {
	t.Helper()
outer:
	for i := range v.NumField() {
		for _, e := range except {
			if v.Type().Field(i).Name == e {
				continue outer
			}
		}
		if v.Field(i).IsZero() {
			t.Errorf("%s.%s is zero: a value the configuration sets does not reach it", name, v.Type().Field(i).Name)
		}
	}
}

// serve.crawlers is validated by the configuration with crawlers' own names and bounds, which
// the config package cannot import: the two agree, so a file that loads compiles.
func TestCrawlerFamiliesAgreeWithConfig(t *testing.T) {
	if !slices.Equal(config.CrawlerFamilies(), crawlers.Families) {
		t.Fatalf("config.CrawlerFamilies %v, crawlers.Families %v", config.CrawlerFamilies(), crawlers.Families)
	}
	if config.CrawlerAgentsMax != crawlers.MaxAgents || config.CrawlerSuffixesMax != crawlers.MaxSuffixes ||
		config.CrawlerRangesMax != crawlers.MaxRanges || config.CrawlerPatternMax != crawlers.MaxPattern {
		t.Fatal("config's serve.crawlers bounds differ from package crawlers'")
	}
	if got := config.ServeTrustedProxiesDefault(); len(got) != len(crawlers.LoopbackProxies()) {
		t.Fatalf("serve.trusted_proxies default %v", got)
	}
}
