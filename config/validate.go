package config

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/crawlers"
)

// badFunc records one problem of one field; each section's validator calls it for every value
// it refuses, so that Validate reports all of them at once.
type badFunc func(path, format string, args ...any)

// Validate checks every value, and the combinations that cannot work. It reports every
// failure, not only the first, as FieldErrors without lines; Load and Parse add the lines.
//
// Each section checks its own keys (the methods below, in the file's order of sections); the
// few rules that join two sections are in validateAcross, so that a reader finds every rule
// a key is subject to in its section's validator or there.
func (c *Config) Validate() error {
	var errs FieldErrors
	bad := func(path, format string, args ...any) {
		errs = append(errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if c.Workers < 1 || c.Workers > WorkersMax {
		bad("workers", "must be 1..%d, got %d", WorkersMax, c.Workers)
	}
	c.Store.validate(bad)
	c.Queue.validate(bad)
	c.Render.validate(bad)
	validateRoutes(c.Routes, bad)
	c.Keys.validate(bad)
	c.Page.validate(bad)
	c.Sitemap.validate(bad)
	c.Supervisor.validate(bad)
	c.HTTP.validate(bad)
	c.Cluster.validate(bad)
	c.Serve.validate(c, bad)
	c.Log.validate(bad)
	c.Freshness.validate(bad)
	c.Verdict.validate(bad)
	c.validateAcross(bad)
	if len(errs) == 0 {
		return nil // not a nil FieldErrors, which would be a non-nil error
	}
	return errs
}

// positive refuses a duration that is zero or negative.
func positive(bad badFunc, path string, d Duration) {
	if d <= 0 {
		bad(path, "must be a positive duration, got %s", d)
	}
}

// validateAcross checks the rules that join two sections.
func (c *Config) validateAcross(bad badFunc) {
	if c.Render.Timeout >= c.Queue.LeaseTTL {
		bad("render.timeout", "%s is not below queue.lease_ttl %s: every slow render would be leased twice", c.Render.Timeout, c.Queue.LeaseTTL)
	}
}

func (s *Store) validate(bad badFunc) {
	positive(bad, "store.gc_interval", s.GCInterval)
	if s.ReadCache < 0 {
		bad("store.read_cache", "must not be negative (0 keeps no read cache), got %d", s.ReadCache)
	}
	switch s.Backend {
	case StoreBackendBadger:
	case StoreBackendPostgres:
		if s.Postgres.DSN == "" && os.Getenv(PostgresDSNEnv) == "" {
			bad("store.postgres.dsn", "the postgres backend needs a DSN here or in %s", PostgresDSNEnv)
		}
	default:
		bad("store.backend", "must be %s or %s, got %q", StoreBackendBadger, StoreBackendPostgres, s.Backend)
	}
	if sh := s.Postgres.Shards; sh < PostgresShardsMin || sh > PostgresShardsMax {
		bad("store.postgres.shards", "must be %d..%d, got %d", PostgresShardsMin, PostgresShardsMax, sh)
	}
}

func (q *Queue) validate(bad badFunc) {
	positive(bad, "queue.release_grace", q.ReleaseGrace)
	positive(bad, "queue.claim_floor.guard", q.ClaimFloor.Guard)
	positive(bad, "queue.claim_floor.unpin_after", q.ClaimFloor.UnpinAfter)
	positive(bad, "queue.ready.sweep_interval", q.Ready.SweepInterval)
	if q.LeaseTTL < LeaseTTLMin {
		bad("queue.lease_ttl", "must be at least %s (a render outliving its lease is rendered twice), got %s", LeaseTTLMin, q.LeaseTTL)
	}
	if q.MaxLeases < MaxLeasesMin || q.MaxLeases > MaxLeasesMax {
		bad("queue.max_leases", "must be %d..%d, got %d", MaxLeasesMin, MaxLeasesMax, q.MaxLeases)
	}
	if q.MaxRemoteLeases < 1 || q.MaxRemoteLeases > q.MaxLeases {
		bad("queue.max_remote_leases", "must be 1..queue.max_leases (%d), got %d", q.MaxLeases, q.MaxRemoteLeases)
	}
	if q.Ready.Capacity < 1 || q.Ready.Capacity > ReadyCapacityMax {
		bad("queue.ready.capacity", "must be 1..%d, got %d", ReadyCapacityMax, q.Ready.Capacity)
	}
	if q.Ready.KeyCapacity < KeyCapacityMin || q.Ready.KeyCapacity > KeyCapacityMax {
		bad("queue.ready.key_capacity", "must be %d..%d, got %d", KeyCapacityMin, KeyCapacityMax, q.Ready.KeyCapacity)
	}
	if q.Ready.SweepCap < q.Ready.Capacity {
		bad("queue.ready.sweep_cap", "must be at least queue.ready.capacity (%d), got %d", q.Ready.Capacity, q.Ready.SweepCap)
	}
	if !(q.Ready.SubmittedBoost >= SubmittedBoostMin && q.Ready.SubmittedBoost <= SubmittedBoostMax) {
		bad("queue.ready.submitted_boost", "must be %v..%v, got %v", SubmittedBoostMin, SubmittedBoostMax, q.Ready.SubmittedBoost)
	}
	if !(q.Lanes.UrgentMaxShare >= 0 && q.Lanes.UrgentMaxShare <= 1) {
		bad("queue.lanes.urgent_max_share", "must be 0..1, got %v", q.Lanes.UrgentMaxShare)
	}
	if !(*q.Lanes.MinShare.Discovered >= 0 && *q.Lanes.MinShare.Discovered <= 1) {
		bad("queue.lanes.min_share.discovered", "must be 0..1, got %v", *q.Lanes.MinShare.Discovered)
	}
	if !(*q.Lanes.MinShare.Cold >= 0 && *q.Lanes.MinShare.Cold <= 1) {
		bad("queue.lanes.min_share.cold", "must be 0..1, got %v", *q.Lanes.MinShare.Cold)
	}
	if q.Lanes.UrgentMaxShare+*q.Lanes.MinShare.Discovered+*q.Lanes.MinShare.Cold > 1 {
		bad("queue.lanes", "urgent_max_share + min_share.discovered + min_share.cold exceeds 1")
	}
	if q.Policy != PolicyReady && q.Policy != PolicyFreshness {
		bad("queue.policy", "must be %s or %s, got %q", PolicyReady, PolicyFreshness, q.Policy)
	}
	if q.ClaimFloor.Guard >= q.ClaimFloor.UnpinAfter {
		bad("queue.claim_floor.guard", "%s must be below unpin_after %s", q.ClaimFloor.Guard, q.ClaimFloor.UnpinAfter)
	}
}

func (r *Render) validate(bad badFunc) {
	positive(bad, "render.timeout", r.Timeout)
	positive(bad, "render.default_interval", r.DefaultInterval)
	positive(bad, "render.failure_retry.fast_delay", r.FailureRetry.FastDelay)
	positive(bad, "render.failure_retry.max_backoff", r.FailureRetry.MaxBackoff)
	positive(bad, "render.suppression.noindex.recheck", r.Suppression.Noindex.Recheck)
	positive(bad, "render.suppression.gone.recheck", r.Suppression.Gone.Recheck)
	switch r.Renderer {
	case "http", "sim", "chrome":
	case "exec":
		if len(r.Exec.Command) == 0 {
			bad("render.exec.command", "the exec renderer needs a command")
		}
	default:
		bad("render.renderer", "must be http, exec, chrome or sim, got %q", r.Renderer)
	}
	r.validateChrome(bad)
	if r.Concurrency < 0 || r.Concurrency > ConcurrencyMax {
		bad("render.concurrency", "must be 0 (derived) or 1..%d, got %d", ConcurrencyMax, r.Concurrency)
	}
	if r.MaxBody < 1 {
		bad("render.max_body", "must be positive")
	}
	if r.MaxBody > MaxPageBody {
		bad("render.max_body", "must not exceed %d bytes (32MiB), the largest page the store keeps, got %d", MaxPageBody, r.MaxBody)
	}
	if r.MaxRedirects < 0 {
		bad("render.max_redirects", "must not be negative")
	}
	if *r.FailureRetry.FastRetries < 0 {
		bad("render.failure_retry.fast_retries", "must not be negative")
	}
	if r.FailureRetry.Factor < FactorMin {
		bad("render.failure_retry.factor", "must be at least %v, got %v", FactorMin, r.FailureRetry.Factor)
	}
	if r.FailureRetry.NonSitemapPenalty < NonSitemapPenaltyMin {
		bad("render.failure_retry.non_sitemap_penalty", "must be at least %v, got %v", NonSitemapPenaltyMin, r.FailureRetry.NonSitemapPenalty)
	}
	if r.Suppression.Noindex.Strikes < 1 {
		bad("render.suppression.noindex.strikes", "must be at least 1")
	}
	if r.Suppression.Gone.Strikes < 1 {
		bad("render.suppression.gone.strikes", "must be at least 1")
	}
	for _, rate := range []struct {
		path string
		v    float64
	}{{"render.sim.transient_rate", r.Sim.TransientRate}, {"render.sim.gone_rate", r.Sim.GoneRate}, {"render.sim.noindex_rate", r.Sim.NoindexRate}} {
		if !(rate.v >= 0 && rate.v <= 1) {
			bad(rate.path, "must be 0..1, got %v", rate.v)
		}
	}
	if r.Sim.TransientRate+r.Sim.GoneRate+r.Sim.NoindexRate > 1 {
		bad("render.sim", "outcome rates add up to more than 1")
	}
	r.Hosts.validate(bad)
	for i, d := range r.Domains {
		if !validDomain(d) {
			bad(fmt.Sprintf("render.domains[%d]", i), "must be a bare host name such as example.com (no scheme, port, path or wildcard), got %q", d)
		}
	}
	for _, dev := range slices.Sorted(maps.Keys(r.UserAgents)) {
		if ua := r.UserAgents[dev]; dev == "" || !validHeaderValue(ua) {
			bad("render.user_agents."+dev, "needs a device name and a non-empty single-line User-Agent")
		}
		if err := cachekey.ValidDevice(dev); err != nil && dev != "" {
			// Cache keys are device|url: such a device could never be told from its URL.
			bad("render.user_agents."+dev, "device name: %v", err)
		}
	}
	if r.Sim.LatencyMedian < 0 {
		bad("render.sim.latency_median", "must not be negative, got %s", r.Sim.LatencyMedian)
	}
	if !validHeaderValue(r.UserAgent) {
		bad("render.user_agent", "must be a non-empty single-line User-Agent")
	}
	if !validHeaderValue(r.UserAgentSuffix) || len(r.UserAgentSuffix) > 128 {
		bad("render.user_agent_suffix", "must be a non-empty single-line product token of at most 128 bytes, got %.64q", r.UserAgentSuffix)
	}
	for i, d := range r.Demand.Ladder {
		if d <= 0 || (i > 0 && d <= r.Demand.Ladder[i-1]) {
			bad(fmt.Sprintf("render.demand.ladder[%d]", i), "rungs must be positive and increasing")
		}
	}
}

func validateRoutes(routes []Route, bad badFunc) {
	names := map[string]bool{}
	for i, rt := range routes {
		path := fmt.Sprintf("routes[%d]", i)
		if rt.Name == "" {
			bad(path+".name", "a route needs a name")
		} else if names[rt.Name] {
			bad(path+".name", "duplicate route name %q", rt.Name)
		}
		if rt.Match != "exact" && rt.Match != "prefix" && rt.Match != "contains" {
			bad(path+".match", "must be exact, prefix or contains, got %q", rt.Match)
		}
		if rt.Path == "" {
			bad(path+".path", "a route needs a path pattern")
		}
		if rt.Interval < 0 {
			bad(path+".interval", "must not be negative")
		}
		if rt.SWR < 0 {
			bad(path+".swr", "must not be negative")
		}
		if rt.MinInterval < 0 || (rt.Interval > 0 && rt.MinInterval > rt.Interval) {
			bad(path+".min_interval", "must be 0..interval, got %s", rt.MinInterval)
		}
		if rt.ChangeInterval < 0 {
			bad(path+".change_interval", "must not be negative")
		}
		if !(rt.Requests >= 0) || math.IsInf(rt.Requests, 0) {
			bad(path+".requests", "must be a finite rate ≥ 0, got %v", rt.Requests)
		}
		for j, p := range rt.Strip {
			if _, err := regexp.Compile(p); err != nil || p == "" {
				bad(fmt.Sprintf("%s.strip[%d]", path, j), "must be a non-empty regular expression: %v", err)
			}
		}
		for j, g := range rt.KeepParams {
			if g == "" {
				bad(fmt.Sprintf("%s.keep_params[%d]", path, j), "a parameter glob may not be empty")
			}
		}
		switch rt.TrailingSlash {
		case "", cachekey.SlashKeep, cachekey.SlashAdd, cachekey.SlashStrip:
		default:
			bad(path+".trailing_slash", "must be keep, add or strip, got %q", rt.TrailingSlash)
		}
		validateExpect(path, rt.Expect, bad)
		names[rt.Name] = true
	}
}

func (k *Keys) validate(bad badFunc) {
	for i, g := range k.DropParams {
		if g == "" {
			bad(fmt.Sprintf("keys.drop_params[%d]", i), "a parameter glob may not be empty")
		}
	}
}

func (p *Page) validate(bad badFunc) {
	positive(bad, "page.swr_ttl", p.SWRTTL)
	positive(bad, "page.max_wait", p.MaxWait)
	if p.MaxWaiters < 1 || p.MaxWaiters > MaxWaitersMax {
		bad("page.max_waiters", "must be 1..%d, got %d", MaxWaitersMax, p.MaxWaiters)
	}
	if p.MaxSiteWaiters < 1 || p.MaxSiteWaiters > p.MaxWaiters {
		bad("page.max_site_waiters", "must be 1..page.max_waiters (%d), got %d", p.MaxWaiters, p.MaxSiteWaiters)
	}
	if p.MaxWait > MaxWaitMax {
		bad("page.max_wait", "must be at most %s (a waiting request holds a connection), got %s", MaxWaitMax, p.MaxWait)
	}
}

func (s *Sitemap) validate(bad badFunc) {
	positive(bad, "sitemap.min_ttl", s.MinTTL)
	if s.MaxDepth < 0 || s.MaxDepth > MaxDepthMax {
		bad("sitemap.max_depth", "must be 0..%d, got %d", MaxDepthMax, s.MaxDepth)
	}
	if s.Refetch < Duration(time.Minute) {
		bad("sitemap.refetch", "must be at least 1m, got %s", s.Refetch)
	}
	if len(s.URLs) > MaxSitemapURLs {
		bad("sitemap.urls", "at most %d sitemaps, got %d", MaxSitemapURLs, len(s.URLs))
	}
	for i, raw := range s.URLs {
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || len(raw) > 2048 {
			bad(fmt.Sprintf("sitemap.urls[%d]", i), "must be an absolute http(s) URL without credentials, of at most 2048 bytes, got %.64q", raw)
		}
	}
}

func (s *Supervisor) validate(bad badFunc) {
	positive(bad, "supervisor.restart_period", s.RestartPeriod)
	positive(bad, "supervisor.backoff_min", s.BackoffMin)
	positive(bad, "supervisor.backoff_max", s.BackoffMax)
	positive(bad, "supervisor.shutdown_timeout", s.ShutdownTimeout)
	positive(bad, "supervisor.ready_timeout", s.ReadyTimeout)
	positive(bad, "supervisor.watchdog_stall", s.WatchdogStall)
	if s.RestartIntensity < 1 {
		bad("supervisor.restart_intensity", "must be at least 1")
	}
	if s.BackoffMin > s.BackoffMax {
		bad("supervisor.backoff_min", "must not exceed backoff_max")
	}
}

func (c *Cluster) validate(bad badFunc) {
	if c.LeaseTTL < ClusterLeaseTTLMin {
		bad("cluster.lease_ttl", "must be at least %s, got %s", ClusterLeaseTTLMin, c.LeaseTTL)
	}
}

func (l *Log) validate(bad badFunc) {
	switch l.Level {
	case "trace", "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be trace, debug, info, warn or error, got %q", l.Level)
	}
	switch l.Format {
	case "json", "console":
	default:
		bad("log.format", "must be json or console, got %q", l.Format)
	}
}

func (r *Render) validateChrome(bad badFunc) {
	c := r.Chrome
	if strings.TrimSpace(c.Path) == "" {
		bad("render.chrome.path", "must name the browser's executable")
	}
	if c.Idle <= 0 || (r.Renderer == "chrome" && c.Idle >= r.Timeout) {
		bad("render.chrome.idle", "must be positive and below render.timeout %s, got %s", r.Timeout, c.Idle)
	}
	if c.Idle > 0 && (c.Settle <= 0 || c.Settle > c.Idle) {
		bad("render.chrome.settle", "must be positive and at most render.chrome.idle %s, got %s", c.Idle, c.Settle)
	}
	if c.LongRequest <= 0 { // at or past render.timeout it never applies: every request holds
		bad("render.chrome.long_request", "must be positive, got %s", c.LongRequest)
	}
	if c.DataWait <= 0 { // at or past render.timeout a same-site request holds until the timeout
		bad("render.chrome.data_wait", "must be positive, got %s", c.DataWait)
	}
	if c.CacheMaxAge < 0 {
		bad("render.chrome.cache_max_age", "must be 0 (no bound) or positive, got %s", c.CacheMaxAge)
	}
	for i, t := range c.BlockTypes {
		if !slices.Contains(ChromeResourceTypes, t) {
			bad(fmt.Sprintf("render.chrome.block_types[%d]", i), "must be one of %s, got %q", strings.Join(ChromeResourceTypes, ", "), t)
		}
	}
	for i, p := range c.Block {
		if strings.Trim(p, "*") == "" || strings.ContainsAny(p, " \t\r\n") {
			bad(fmt.Sprintf("render.chrome.block[%d]", i), "must be a URL pattern with something besides * and no blanks, got %q", p)
		}
	}
	for i, a := range c.Allow {
		key := fmt.Sprintf("render.chrome.allow[%d]", i)
		if a.Match != "exact" && a.Match != "prefix" && a.Match != "contains" {
			bad(key+".match", "must be exact, prefix or contains, got %q", a.Match)
		}
		if a.Path == "" {
			bad(key+".path", "needs a path pattern")
		}
		for j, l := range a.Load {
			if !slices.Contains(ChromeResourceTypes, l) && (strings.Trim(l, "*") == "" || strings.ContainsAny(l, " \t\r\n")) {
				bad(fmt.Sprintf("%s.load[%d]", key, j), "must be a resource type (%s) or a URL pattern with something besides * and no blanks, got %q",
					strings.Join(ChromeResourceTypes, ", "), l)
			}
		}
	}
	if c.RecycleAfter < 1 {
		bad("render.chrome.recycle_after", "must be at least 1, got %d", c.RecycleAfter)
	}
	if c.MaxRSS < ChromeMaxRSSMin {
		bad("render.chrome.max_rss", "must be at least %d bytes (64MiB), got %d", ChromeMaxRSSMin, c.MaxRSS)
	}
	if c.Nice < 0 || c.Nice > ChromeNiceMax {
		bad("render.chrome.nice", "must be 0..%d (0: the worker's own priority), got %d", ChromeNiceMax, c.Nice)
	}
	if strings.TrimSpace(c.User) == "" {
		bad("render.chrome.user", "must name an account (the browser never runs as root)")
	}
	for _, name := range slices.Sorted(maps.Keys(r.Devices)) {
		d, path := r.Devices[name], "render.devices."+name
		if err := cachekey.ValidDevice(name); err != nil || name == "" {
			bad(path, "device name: %v", err)
		}
		if d.Width < 1 || d.Width > DeviceSizeMax {
			bad(path+".width", "must be 1..%d CSS pixels, got %d", DeviceSizeMax, d.Width)
		}
		if d.Height < 1 || d.Height > DeviceSizeMax {
			bad(path+".height", "must be 1..%d CSS pixels, got %d", DeviceSizeMax, d.Height)
		}
		if !(d.Scale >= 0 && d.Scale <= DeviceScaleMax) {
			bad(path+".scale", "must be 0..%v, got %v", DeviceScaleMax, d.Scale)
		}
		if d.UserAgent != "" && !validHeaderValue(d.UserAgent) {
			bad(path+".user_agent", "must be a single-line User-Agent")
		}
	}
}

func (h *Hosts) validate(bad badFunc) {
	if h.MaxConcurrency < 1 || h.MaxConcurrency > HostsMaxConcurrencyMax {
		bad("render.hosts.max_concurrency", "must be 1..%d, got %d", HostsMaxConcurrencyMax, h.MaxConcurrency)
	}
	for _, host := range slices.Sorted(maps.Keys(h.Overrides)) {
		path := "render.hosts.overrides." + host
		if !validHostPort(host) {
			// A cache key's host is lower-case and has no default port: an override spelled
			// otherwise would never match a render.
			bad(path, "must be a host as a cache key names it: lower-case, with its port only if not the default (shop.example, shop.example:8080, [::1]:8080), got %q", host)
		}
		if n := h.Overrides[host]; n < 1 || n > HostsMaxConcurrencyMax {
			bad(path, "must be 1..%d renders in flight, got %d", HostsMaxConcurrencyMax, n)
		}
	}
	if h.MaxPause < HostsMinPause {
		bad("render.hosts.max_pause", "must be at least %s (the shortest pause a refusal causes), got %s", HostsMinPause, h.MaxPause)
	}
	if h.HalveAfter < 1 || h.HalveAfter > HostsStreakMax {
		bad("render.hosts.halve_after", "must be 1..%d, got %d", HostsStreakMax, h.HalveAfter)
	}
	if h.GrowAfter < 1 || h.GrowAfter > HostsStreakMax {
		bad("render.hosts.grow_after", "must be 1..%d, got %d", HostsStreakMax, h.GrowAfter)
	}
}

// validate checks the crawler listener's keys: a listener beyond loopback needs a token, a
// token is never the admin one, and a miss waits a bounded time.
func (sv *Serve) validate(c *Config, bad badFunc) {
	if sv.Listen != "" {
		if _, port, err := net.SplitHostPort(sv.Listen); err != nil || port == "" {
			bad("serve.listen", "must be an address such as :3000 or 127.0.0.1:3000, got %q", sv.Listen)
		} else if len(sv.Tokens) == 0 && !LoopbackAddr(sv.Listen) {
			bad("serve.tokens", "required when serve.listen (%s) is beyond loopback: a crawler's middleware sends one as X-Prerender-Token", sv.Listen)
		}
		if sv.Listen == c.Listen {
			bad("serve.listen", "must differ from listen (%s): the crawler listener serves pages only", c.Listen)
		}
	}
	for i, tok := range sv.Tokens {
		switch {
		case !validHeaderValue(tok) || strings.TrimSpace(tok) != tok:
			bad(fmt.Sprintf("serve.tokens[%d]", i), "must be a single-line header value without surrounding blanks")
		case c.Token != "" && tok == c.Token:
			bad(fmt.Sprintf("serve.tokens[%d]", i), "must not be the admin token: the crawler listener's tokens are read-only")
		}
	}
	if sv.Wait <= 0 || sv.Wait > MaxWaitMax {
		bad("serve.wait", "must be a positive duration at most %s, got %s", MaxWaitMax, sv.Wait)
	}
	if !(sv.MissRate > 0 && sv.MissRate <= float64(ServeMissBurstMax)) {
		bad("serve.miss_rate", "must be a positive number of new targets a second, at most %d, got %v", ServeMissBurstMax, sv.MissRate)
	}
	if sv.MissBurst < 1 || sv.MissBurst > ServeMissBurstMax {
		bad("serve.miss_burst", "must be 1..%d, got %d", ServeMissBurstMax, sv.MissBurst)
	}
	if sv.DemandBytes < ServeDemandBytesMin || sv.DemandBytes > ServeDemandBytesMax {
		bad("serve.demand_bytes", "must be %d (1MiB)..%d (16GiB) bytes, got %d", ServeDemandBytesMin, ServeDemandBytesMax, sv.DemandBytes)
	}
	// serve.mobile_agents is the crawler table's device patterns (package crawlers), held to
	// its bounds.
	if len(sv.MobileAgents) > CrawlerAgentsMax {
		bad("serve.mobile_agents", "lists %d User-Agent substrings, at most %d", len(sv.MobileAgents), CrawlerAgentsMax)
	}
	for i, a := range sv.MobileAgents {
		if strings.TrimSpace(a) == "" {
			bad(fmt.Sprintf("serve.mobile_agents[%d]", i), "must not be blank")
		} else if len(a) > CrawlerPatternMax {
			bad(fmt.Sprintf("serve.mobile_agents[%d]", i), "must be at most %d bytes", CrawlerPatternMax)
		}
	}
	sv.validateCrawlers(bad, c.Render.DeviceNames())
}

// validateCrawlers checks the client address and crawler verification keys: a header name
// that is one, proxies that are CIDRs, bounded lookups, and a family table whose names are the
// counted set.
func (sv *Serve) validateCrawlers(bad badFunc, devices map[string]bool) {
	if h := sv.ClientIPHeader; h != "" && !headerName(h) {
		bad("serve.client_ip_header", "must be a header name such as X-Forwarded-For, got %q", h)
	}
	for i, p := range sv.TrustedProxies {
		if _, err := netip.ParsePrefix(strings.TrimSpace(p)); err != nil {
			bad(fmt.Sprintf("serve.trusted_proxies[%d]", i), "must be a CIDR such as 10.0.0.0/8 or 127.0.0.1/32: %v", err)
		}
	}
	v := sv.Verify
	if v.Timeout <= 0 || v.Timeout > ServeVerifyTimeoutMax {
		bad("serve.verify.timeout", "must be a positive duration at most %s, got %s", ServeVerifyTimeoutMax, v.Timeout)
	}
	if v.Concurrency < 1 || v.Concurrency > ServeVerifyConcurrencyMax {
		bad("serve.verify.concurrency", "must be 1..%d, got %d", ServeVerifyConcurrencyMax, v.Concurrency)
	}
	if v.CacheEntries < 1 || v.CacheEntries > ServeVerifyCacheEntriesMax {
		bad("serve.verify.cache_entries", "must be 1..%d, got %d", ServeVerifyCacheEntriesMax, v.CacheEntries)
	}
	if v.CacheTTL <= 0 || v.CacheTTL > ServeVerifyCacheTTLMax {
		bad("serve.verify.cache_ttl", "must be a positive duration at most %s, got %s", ServeVerifyCacheTTLMax, v.CacheTTL)
	}
	seen := map[string]bool{}
	for i, f := range sv.Crawlers {
		path := fmt.Sprintf("serve.crawlers[%d]", i)
		switch {
		case !slices.Contains(CrawlerFamilies(), f.Family):
			bad(path+".family", "must be one of %s, got %q", strings.Join(CrawlerFamilies(), ", "), f.Family)
		case seen[f.Family]:
			bad(path+".family", "%q is given twice", f.Family)
		}
		seen[f.Family] = true
		if len(f.Agents) == 0 || len(f.Agents) > CrawlerAgentsMax {
			bad(path+".agents", "must list 1..%d User-Agent substrings, got %d", CrawlerAgentsMax, len(f.Agents))
		}
		for j, a := range f.Agents {
			if strings.TrimSpace(a) == "" || len(a) > CrawlerPatternMax {
				bad(fmt.Sprintf("%s.agents[%d]", path, j), "must be non-blank and at most %d bytes", CrawlerPatternMax)
			}
		}
		if len(f.ReverseDNS) > CrawlerSuffixesMax {
			bad(path+".reverse_dns", "lists %d suffixes, at most %d", len(f.ReverseDNS), CrawlerSuffixesMax)
		}
		for j, d := range f.ReverseDNS {
			if n := strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(d), "."), "."); !crawlers.DomainSuffix(n) || len(n) > CrawlerPatternMax {
				bad(fmt.Sprintf("%s.reverse_dns[%d]", path, j), "must be a domain name of two labels or more (.googlebot.com), got %q", d)
			}
		}
		if len(f.Ranges) > CrawlerRangesMax {
			bad(path+".ranges", "lists %d ranges, at most %d", len(f.Ranges), CrawlerRangesMax)
		}
		for j, r := range f.Ranges {
			if _, err := netip.ParsePrefix(strings.TrimSpace(r)); err != nil {
				bad(fmt.Sprintf("%s.ranges[%d]", path, j), "must be a CIDR: %v", err)
			}
		}
		if f.Device != "" && !devices[f.Device] {
			bad(path+".device", "must be one of render's devices (%s), got %q", strings.Join(slices.Sorted(maps.Keys(devices)), ", "), f.Device)
		}
	}
}

// Bounds of a serve.crawlers family (package crawlers' MaxAgents, MaxSuffixes, MaxRanges,
// MaxPattern; a test pins them equal).
const (
	CrawlerAgentsMax   = 64
	CrawlerSuffixesMax = 16
	CrawlerRangesMax   = 512
	CrawlerPatternMax  = 128
)

// headerName reports whether h is an HTTP header name (a token).
func headerName(h string) bool {
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return h != ""
}

func (h *HTTP) validate(bad badFunc) {
	positive(bad, "http.read_header_timeout", h.ReadHeaderTimeout)
	positive(bad, "http.read_timeout", h.ReadTimeout)
	positive(bad, "http.write_timeout", h.WriteTimeout)
	positive(bad, "http.bulk_timeout", h.BulkTimeout)
	positive(bad, "http.idle_timeout", h.IdleTimeout)
	if h.MaxConns < 1 || h.MaxConns > MaxConnsMax {
		bad("http.max_conns", "must be 1..%d, got %d", MaxConnsMax, h.MaxConns)
	}
	if h.MaxConns >= 1 && (h.MaxUnauthenticated < 1 || h.MaxUnauthenticated > h.MaxConns) {
		bad("http.max_unauthenticated", "must be 1..http.max_conns (%d), got %d", h.MaxConns, h.MaxUnauthenticated)
	}
	if h.ReadHeaderTimeout > h.ReadTimeout {
		bad("http.read_header_timeout", "%s exceeds http.read_timeout %s, which includes the headers", h.ReadHeaderTimeout, h.ReadTimeout)
	}
	if h.BulkTimeout < h.ReadTimeout || h.BulkTimeout < h.WriteTimeout {
		bad("http.bulk_timeout", "%s must be at least http.read_timeout and http.write_timeout", h.BulkTimeout)
	}
	for i, d := range h.Hosts {
		if !validDomain(d) {
			bad(fmt.Sprintf("http.hosts[%d]", i), "must be a host name such as freshq.internal or an IP address (no scheme, port, path or wildcard), got %q", d)
		}
	}
}

func (f *Freshness) validate(bad badFunc) {
	if f.RequestTau < Duration(time.Minute) {
		bad("freshness.request_tau", "must be at least 1m, got %s", f.RequestTau)
	}
	if f.DemandFlush < Duration(time.Second) || f.DemandFlush > f.RequestTau {
		bad("freshness.demand_flush", "must be 1s..freshness.request_tau, got %s", f.DemandFlush)
	}
	if !(f.Requests >= 0) || math.IsInf(f.Requests, 0) {
		bad("freshness.requests", "must be a finite rate ≥ 0, got %v", f.Requests)
	}
	if !(f.Threshold > 0) || math.IsInf(f.Threshold, 0) {
		bad("freshness.threshold", "must be a finite number > 0, got %v", f.Threshold)
	}
	if f.ConditionalEvery < 1 {
		bad("freshness.conditional_every", "must be at least 1 (1: never check, always render), got %d", f.ConditionalEvery)
	}
	if f.ConditionalMaxAge < 0 {
		bad("freshness.conditional_max_age", "must not be negative")
	}
	if !(f.PriorWeight >= 0) || f.PriorWeight > 1e6 {
		bad("freshness.prior_weight", "must be 0..1000000, got %v", f.PriorWeight)
	}
	if !(f.StretchFactor >= 1) || f.StretchFactor > FreshnessStretchFactorMax {
		bad("freshness.stretch_factor", "must be 1..%v, got %v", FreshnessStretchFactorMax, f.StretchFactor)
	}
}
