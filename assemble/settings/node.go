// Package node narrows one configuration into the settings of a node's services: the claim
// path (claim.Settings), the sweep (sweep.Settings), worker 0's services (intake.Settings) and
// the crawler listener (serve.Settings), each with only what its package reads. It is the
// sibling of package assemble (which narrows the configuration for the packages below the
// services: policy, hosts, render, chrome), kept apart so that the test helpers those services'
// tests share (testkit/qtest) can build a policy through assemble without importing the
// services themselves.
//
// A Node is one configuration's settings, all of them: a worker builds one at start and one at
// every reload, and hands each service a function that reads the Node in force, so that a
// reload applies to each service's next request, sweep or claim, and a service's policy and
// settings always come from the same file.
//
// Invariant: a value of the configuration reaches a service only through what is built here;
// each function is tested to carry every value (node_test.go).
package settings

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/crawlers"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/serve"
	"github.com/freshq/freshq/sitemap"
	"github.com/freshq/freshq/sitemapruns"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/wire"
)

// Node is the settings of every service of a node under one configuration. It is immutable.
type Node struct {
	Policy *policy.Policy
	Claim  claim.Settings
	Sweep  sweep.Settings
	Intake intake.Settings
	// Sitemap is what worker 0's sitemap runs read.
	Sitemap sitemapruns.Settings
	// Misses is what render on miss reads.
	Misses misses.Settings
	Serve  serve.Settings
	// SweepInterval is queue.ready.sweep_interval, for worker 0's sweep loop.
	SweepInterval time.Duration
}

// New narrows cfg, which must have passed validation (config.Load and config.Parse validate),
// into a Node.
func New(cfg *config.Config) (*Node, error) {
	pol, err := assemble.Policy(cfg)
	if err != nil {
		return nil, err
	}
	n := &Node{Policy: pol, Claim: ClaimSettings(cfg), Sweep: SweepSettings(cfg), Intake: IntakeSettings(cfg, pol),
		Sitemap: SitemapRunsSettings(cfg, pol), Misses: MissesSettings(cfg, pol), SweepInterval: cfg.Queue.Ready.SweepInterval.D()}
	if _, err := CrawlerTable(cfg); err != nil {
		return nil, fmt.Errorf("serve.crawlers: %w", err)
	}
	n.Serve = ServeSettings(cfg, pol, &n.Misses)
	return n, nil
}

// ClaimSettings narrows cfg to what a claim reads.
func ClaimSettings(cfg *config.Config) claim.Settings {
	return claim.Settings{LeaseTTL: cfg.Queue.LeaseTTL.D(), ReadyEnabled: cfg.ReadyEnabled(),
		Hosts: assemble.HostsLimits(cfg.Render.Hosts, cfg.Render.Domains...)}
}

// SweepSettings narrows cfg to what a sweep reads besides the policy.
func SweepSettings(cfg *config.Config) sweep.Settings {
	q := cfg.Queue
	return sweep.Settings{
		ReadyEnabled: cfg.ReadyEnabled(), Capacity: q.Ready.Capacity, SweepCap: q.Ready.SweepCap,
		FloorGuard: q.ClaimFloor.Guard.D(), UnpinAfter: q.ClaimFloor.UnpinAfter.D(),
		RenderSlots: (cfg.Workers - 1) * assemble.RenderConcurrency(cfg),
		Hosts:       assemble.HostsLimits(cfg.Render.Hosts, cfg.Render.Domains...),
	}
}

// IntakeSettings narrows cfg to what worker 0's services read, with pol, the policy compiled
// from cfg (assemble.Policy), so that one read of them gives both. The routes' settings are
// compiled here once, in the order pol compiled its routes from (cfg.Routes), so that a key's
// one match (intake.Settings.Resolve) finds both.
func IntakeSettings(cfg *config.Config, pol *policy.Policy) intake.Settings {
	q, r, fr := cfg.Queue, cfg.Render, cfg.Freshness
	routes := make([]intake.RouteSettings, len(cfg.Routes))
	for i, rt := range cfg.Routes {
		// A validated configuration's expects compile (config refuses the others at load).
		expect, _ := rt.Expect.Compile()
		routes[i] = intake.RouteSettings{ServeStale: rt.ServeStale == nil || *rt.ServeStale, Strip: rt.Strip,
			Requests: rt.Requests, MinInterval: rt.MinInterval.D(), ChangeInterval: rt.ChangeInterval.D(), Expect: expect}
	}
	return intake.Settings{
		Policy:          pol,
		Devices:         r.DeviceNames(),
		Domains:         r.Domains,
		LeaseTTL:        q.LeaseTTL.D(),
		MaxRemoteLeases: q.MaxRemoteLeases,
		ReleaseGrace:    q.ReleaseGrace.D(),
		SweepInterval:   q.Ready.SweepInterval.D(),
		Hosts:           assemble.HostsLimits(r.Hosts, r.Domains...),
		Freshness: intake.FreshnessSettings{Policy: q.Policy, On: q.Policy == config.PolicyFreshness,
			Normalize: fr.Normalize == nil || *fr.Normalize, RequestTau: fr.RequestTau.D(), Requests: fr.Requests,
			Threshold: fr.Threshold, PriorWeight: fr.PriorWeight, StretchFactor: fr.StretchFactor, MinIntervalDiv: config.MinIntervalDivisor,
			ConditionalEvery: fr.ConditionalEvery, ConditionalMaxAge: fr.ConditionalMaxAge.D()},
		Routes:    routes,
		Verdict:   cfg.Verdict.Settings(),
		KeepBytes: int64(cfg.Verdict.KeepBytes),
	}
}

// SitemapRunsSettings narrows cfg to what a sitemap run reads, with the keying of pol, the
// policy compiled from cfg (assemble.Policy).
func SitemapRunsSettings(cfg *config.Config, pol *policy.Policy) sitemapruns.Settings {
	r := cfg.Render
	return sitemapruns.Settings{
		Keying:  keyingOf(cfg, pol),
		Domains: r.Domains,
		Fetch: sitemap.Options{Domains: r.Domains, Timeout: r.Timeout.D(), UserAgent: r.Marked(r.UserAgent),
			MaxDepth: cfg.Sitemap.MaxDepth, MaxDecompressed: int64(cfg.Sitemap.MaxDecompressed)},
		MinTTL: cfg.Sitemap.MinTTL.D(), URLs: cfg.Sitemap.URLs, Refetch: cfg.Sitemap.Refetch.D(),
	}
}

// keyingOf is the devices of cfg and the key rules of pol, the policy compiled from it.
func keyingOf(cfg *config.Config, pol *policy.Policy) intake.Keying {
	return intake.Keying{Devices: cfg.Render.DeviceNames(), Rules: pol.Keys()}
}

// MissesSettings narrows cfg to what render on miss reads.
func MissesSettings(cfg *config.Config, _ *policy.Policy) misses.Settings {
	q := cfg.Queue
	return misses.Settings{Domains: cfg.Render.Domains, Sites: assemble.HostsLimits(cfg.Render.Hosts, cfg.Render.Domains...).Sites,
		Flights: misses.MaxFlights(q.Lanes.UrgentMaxShare, q.Ready.Capacity),
		Waiters: cfg.Page.MaxWaiters, SiteWaiters: cfg.Page.MaxSiteWaiters, Rate: cfg.Serve.MissRate, Burst: cfg.Serve.MissBurst,
		MaxWait: cfg.Page.MaxWait.D()}
}

// ServeSettings narrows cfg to what the crawler listener reads, beside ms, render on miss's
// settings of the same configuration, and the keying of pol, the policy compiled from cfg.
func ServeSettings(cfg *config.Config, pol *policy.Policy, ms *misses.Settings) serve.Settings {
	sv := cfg.Serve
	table, err := CrawlerTable(cfg)
	if err != nil { // validation refuses what crawlers.New does: New says so
		table = crawlers.Default()
	}
	trusted := make([]netip.Prefix, 0, len(sv.TrustedProxies))
	for _, p := range sv.TrustedProxies {
		if pr, err := netip.ParsePrefix(strings.TrimSpace(p)); err == nil {
			trusted = append(trusted, pr.Masked())
		}
	}
	return serve.Settings{Keying: keyingOf(cfg, pol), Misses: ms, Tokens: sv.Tokens, Wait: sv.Wait.D(),
		ClientIPHeader: sv.ClientIPHeader, TrustedProxies: trusted, Crawlers: table,
		Verify: sv.VerifyCrawlers != nil && *sv.VerifyCrawlers, VerifyRetryAfter: int(sv.Verify.CacheTTL.D().Seconds())}
}

// CrawlerTable is the table of User-Agent patterns cfg puts in force: the families of
// serve.crawlers, else the ones shipped with freshq (crawlers/families.yaml), and the device
// patterns of serve.mobile_agents (as the one pattern of device mobile), else the shipped
// ones. Package config holds the table as data, validated to the same rules (a test pins its
// names and bounds to package crawlers'), and this is where it is joined to the compiled one.
func CrawlerTable(cfg *config.Config) (*crawlers.Table, error) {
	sv := cfg.Serve
	if len(sv.Crawlers) == 0 && sv.MobileAgents == nil {
		return crawlers.Default(), nil
	}
	specs := crawlers.DefaultSpecs()
	if len(sv.Crawlers) > 0 {
		specs = make([]crawlers.Spec, len(sv.Crawlers))
		for i, f := range sv.Crawlers {
			specs[i] = crawlers.Spec{Family: f.Family, Agents: f.Agents, ReverseDNS: f.ReverseDNS, Ranges: f.Ranges, Device: f.Device}
		}
	}
	devices := crawlers.DefaultDevices()
	if sv.MobileAgents != nil {
		devices = []crawlers.DeviceSpec{{Device: "mobile", Agents: sv.MobileAgents}}
	}
	return crawlers.New(specs, devices...)
}

// PlanFunc is POST /v1/plan's computation over svc: the file is loaded as freshq-supervisor
// would load it (strictly, defaulted, validated, within ctx), and its policy planned against
// the rows. A file that does not load is a *wire.FieldError naming the first key it fails on,
// or "body" when it is not YAML.
func PlanFunc(svc *capacity.Service) api.PlanFunc {
	return func(ctx context.Context, file []byte) (wire.Plan, error) {
		pol, err := ParsePlan(ctx, file)
		if err != nil {
			return wire.Plan{}, err
		}
		return svc.Plan(pol)
	}
}

// ParsePlan loads a proposed configuration file as freshq-supervisor would (strictly,
// defaulted, validated, within ctx) and compiles its policy. A file that does not load is a
// *wire.FieldError naming the first key it fails on, or "body" when it is not YAML.
func ParsePlan(ctx context.Context, file []byte) (*policy.Policy, error) {
	next, err := config.ParseContext(ctx, file)
	if err != nil {
		return nil, &wire.FieldError{Field: configField(err), Err: err}
	}
	pol, err := assemble.Policy(next)
	if err != nil {
		return nil, &wire.FieldError{Field: "body", Err: err}
	}
	return pol, nil
}

// configField names the configuration key an error is about: the first field that failed
// validation, or "body" for a file that is not valid YAML (its message says where).
func configField(err error) string {
	var fe *config.FieldError
	if errors.As(err, &fe) {
		return fe.Path
	}
	return "body"
}

// ClaimSettingsOf, SweepSettingsOf and ServeSettingsOf are the narrowings in the form the
// services' tests take them (testkit/qtest.Settings): from a configuration and the policy
// compiled from it. IntakeSettings has that form already.
func ClaimSettingsOf(cfg *config.Config, _ *policy.Policy) claim.Settings { return ClaimSettings(cfg) }

// SweepSettingsOf is SweepSettings in the form of ClaimSettingsOf.
func SweepSettingsOf(cfg *config.Config, _ *policy.Policy) sweep.Settings { return SweepSettings(cfg) }

// ServeSettingsOf is ServeSettings with the services' settings of the same configuration.
func ServeSettingsOf(cfg *config.Config, pol *policy.Policy) serve.Settings {
	ms := MissesSettings(cfg, pol)
	return ServeSettings(cfg, pol, &ms)
}
