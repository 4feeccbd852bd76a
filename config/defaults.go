package config

import (
	"cmp"
	"time"

	"github.com/freshq/freshq/cachekey"
)

// Every default and every bound that is a choice lives here, once: EnsureDefaults fills a key
// from its XDefault, Validate checks it against its XMin or XMax, and docs/CONFIGURATION.md's
// table is tested against Default(). A constant is named after its field, suffixed Default,
// Min or Max.

const day = 24 * time.Hour

// Top level.
const (
	DataDirDefault   = "./data"
	ListenDefault    = "127.0.0.1:8420"
	WorkersDefault   = 3 // worker 0 (the store) and two render workers
	WorkersMax       = 256
	LogLevelDefault  = "info"
	LogFormatDefault = "json"
)

// store
const (
	StoreBackendBadger   = "badger"
	StoreBackendPostgres = "postgres"
	StoreBackendDefault  = StoreBackendBadger
	GCIntervalDefault    = Duration(10 * time.Minute)
	// ReadCacheDefault holds about ten thousand pages of 6 KB gzipped: requests follow a Zipf
	// law, so those take most of them.
	ReadCacheDefault = ByteSize(64 << 20)
	// PostgresShardsDefault is enough shards for tens of nodes to get an even share each, few
	// enough that a pass's per-shard reads stay cheap (store/pgstore).
	PostgresShardsDefault = 256
	PostgresShardsMin     = 1
	PostgresShardsMax     = 1 << 16
)

// queue
const (
	LeaseTTLDefault = Duration(10 * time.Minute)
	// LeaseTTLMin leaves a render room to finish: one that outlives its lease is rendered twice.
	LeaseTTLMin = Duration(2 * time.Minute)
	// MaxLeasesMax keeps the lease table within the segment's limit.
	MaxLeasesDefault = 4096
	MaxLeasesMin     = 16
	MaxLeasesMax     = 1 << 24
	// MaxRemoteLeasesDivisor: queue.max_remote_leases defaults to max_leases divided by it (at
	// least 1), so that remote renderers cannot fill the table.
	MaxRemoteLeasesDivisor = 4
	ReleaseGraceDefault    = Duration(5 * time.Second)
	GuardDefault           = Duration(5 * time.Minute)
	UnpinAfterDefault      = Duration(time.Hour)

	ReadyEnabledDefault  = true
	ReadyCapacityDefault = 5000
	ReadyCapacityMax     = 1 << 24
	KeyCapacityDefault   = 256
	KeyCapacityMin       = 16
	// KeyCapacityMax is the longest key a ready-set entry can hold: its length is 16 bits.
	KeyCapacityMax        = 1 << 15
	SweepIntervalDefault  = Duration(time.Minute)
	SweepCapDefault       = 500_000
	SubmittedBoostDefault = 2.0
	SubmittedBoostMin     = 1.0
	SubmittedBoostMax     = 100.0

	UrgentMaxShareDefault     = 0.2
	DiscoveredMinShareDefault = 0.10
	ColdMinShareDefault       = 0.02
)

// render
const (
	RendererDefault = "http"
	// ConcurrencyDefault is render.concurrency for the renderers that wait on their origin (http,
	// exec, sim) when the file does not set it; the chrome renderer's is derived from the cores
	// (Config.RenderConcurrency).
	ConcurrencyDefault = 8
	ConcurrencyMax     = 4096
	// ChromePagesPerCore is the chrome renderer's pages in flight a core, across a node's render
	// workers, when render.concurrency is not set. A render node is a machine of its own: on an
	// otherwise idle 2-core machine, 4 pages in flight of an SPA on a 300 ms API kept 0.67 of a
	// core busy (12.6 s wall, 8.4 CPU s for 40 pages), the rest of the time the pages waited on
	// their own requests; about 10 in flight keep 80 % of 2 cores busy at that CPU a page, so 5 a
	// core. On a machine already busy with other work fewer do as well for less CPU a page
	// (docs/RENDERING.md, Sizing a render node): set render.concurrency there.
	ChromePagesPerCore = 5
	// ConcurrencyDerivedMin is the fewest pages in flight a render worker is given when they are
	// derived: one page waiting on its API while another renders keeps a core busy, even where
	// render workers outnumber the cores.
	ConcurrencyDerivedMin = 2

	HostsMaxConcurrencyDefault = 4                          // render.hosts.max_concurrency
	HostsMaxPauseDefault       = Duration(10 * time.Minute) // render.hosts.max_pause
	HostsHalveAfterDefault     = 3                          // render.hosts.halve_after
	HostsGrowAfterDefault      = 10                         // render.hosts.grow_after
	TimeoutDefault             = Duration(60 * time.Second) // render.timeout; below queue.lease_ttl
	IntervalDefault            = Duration(day)              // render.default_interval
	UserAgentDefault           = "freshq/1 (+render queue)"
	// UserAgentSuffixDefault ends every render's User-Agent (render.user_agent_suffix), so a
	// site can tell renders from visitors whatever agent a device is given.
	UserAgentSuffixDefault   = "freshq/1"
	MaxBodyDefault           = ByteSize(10 << 20) // at most MaxPageBody
	MaxRedirectsDefault      = 5
	SimSeedDefault           = 1
	FastRetriesDefault       = 2
	FastDelayDefault         = Duration(time.Minute)
	FactorDefault            = 2.0
	FactorMin                = 1.0
	MaxBackoffDefault        = Duration(7 * day)
	NonSitemapPenaltyDefault = 4.0
	NonSitemapPenaltyMin     = 1.0
	NoindexStrikesDefault    = 4
	NoindexRecheckDefault    = Duration(7 * day)
	GoneStrikesDefault       = 2
	GoneRecheckDefault       = Duration(14 * day)
)

// render.hosts bounds
const (
	// HostsMaxConcurrencyMax bounds render.hosts.max_concurrency and its overrides: it is
	// hosts.MaxTokens, the most host tokens a take tries (a test of package hosts pins the two
	// equal; this package imports no shm).
	HostsMaxConcurrencyMax = 1024
	// HostsMinPause is the shortest pause a refusal (a 429, or a 503 with Retry-After) causes;
	// render.hosts.max_pause is at least it.
	HostsMinPause = Duration(time.Second)
	// HostsStreakMax bounds render.hosts.halve_after and grow_after: the streaks are counted in
	// 32 bits, and a longer one would never be reached in practice.
	HostsStreakMax = 1_000_000
)

// render.chrome and render.devices
const (
	ChromePathDefault = "chromium"
	ChromeIdleDefault = Duration(500 * time.Millisecond)
	// ChromeSettleDefault is render.chrome.settle: once the page's own data requests have been
	// answered and nothing holds it, this much quiet makes it ready (a request the answer sets
	// off begins well within it), rather than render.chrome.idle.
	ChromeSettleDefault = Duration(150 * time.Millisecond)
	// ChromeLongRequestDefault is render.chrome.long_request: a page's own data fetch answers well
	// within 2 s (four times render.chrome.idle), while a long-poll or a stream is held open for
	// tens of seconds; past it a request no longer keeps a page from being idle.
	ChromeLongRequestDefault = Duration(2 * time.Second)
	// ChromeDataWaitDefault is render.chrome.data_wait: a same-site XHR or fetch (the page's
	// own data) keeps holding the page while in flight for up to this long, so that a slow API
	// (3 s) is waited for rather than captured as "Loading…"; past it the request is taken to
	// be a long-poll.
	ChromeDataWaitDefault = Duration(10 * time.Second)
	// ChromeCacheMaxAgeDefault is render.chrome.cache_max_age: the longest a sub-resource
	// (a script, a style) the browser cached is used before the cache is cleared, whatever
	// max-age the site gave it, so that a site's deploy under the same URLs reaches renders.
	ChromeCacheMaxAgeDefault  = Duration(10 * time.Minute)
	ChromeRecycleAfterDefault = 1000
	ChromeMaxRSSDefault       = ByteSize(2 << 30)
	ChromeMaxRSSMin           = ByteSize(64 << 20)
	ChromeUserDefault         = "nobody"
	DeviceSizeMax             = 10000
	DeviceScaleMax            = 10.0

	// ChromeNiceDefault is render.chrome.nice: the browsers yield the cores to worker 0 (the
	// crawler listener, the store) on a node that both serves and renders.
	ChromeNiceDefault = 10
	ChromeNiceMax     = 19 // nice's lowest priority

	// DefaultDevice is the device of a target that names none.
	DefaultDevice = cachekey.DefaultDevice

	// The built-in devices (render.devices may replace them by name).
	DesktopWidth, DesktopHeight = 1366, 768
	MobileWidth, MobileHeight   = 412, 915
	MobileScale                 = 2.625
	MobileUserAgentDefault      = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36 freshq/1"
)

// ChromeBlockTypesDefault is render.chrome.block_types' default: what a prerendered page does
// not need to be captured, and what slows renders down most.
func ChromeBlockTypesDefault() []string { return []string{"image", "media", "font"} }

// ChromeThirdParties is what render.chrome.block_third_parties (on by default) adds to
// render.chrome.block: third parties' analytics, ads, tag managers, session recorders and web
// fonts, which put nothing a crawler reads into the page and cost every render their requests
// and scripts. render.chrome.allow lets any of them through for the pages of a path.
func ChromeThirdParties() []string {
	var out []string
	for _, host := range []string{
		"google-analytics.com", "googletagmanager.com", "googlesyndication.com", "googleadservices.com",
		"doubleclick.net", "adservice.google.com", "connect.facebook.net", "hotjar.com", "clarity.ms",
		"segment.com", "segment.io", "mixpanel.com", "amplitude.com", "fullstory.com", "bat.bing.com",
		"amazon-adsystem.com", "criteo.com", "criteo.net", "taboola.com", "outbrain.com", "adnxs.com",
		"scorecardresearch.com", "quantserve.com", "nr-data.net", "js-agent.newrelic.com",
		"fonts.googleapis.com", "fonts.gstatic.com", "use.typekit.net",
	} {
		// The host itself and its subdomains, on any scheme and port.
		out = append(out, "*://"+host+"*", "*://*."+host+"*")
	}
	return out
}

// DropParamsDefault is keys.drop_params' default: the tracking parameters of campaign links
// and ad clicks, which never change what a page renders.
func DropParamsDefault() []string {
	return []string{"utm_*", "gclid", "fbclid", "msclkid", "mc_*", "_ga"}
}

// BuiltinDevices are the devices every renderer knows: desktop and mobile. A user agent left
// empty is render.user_agents.<device>, else render.user_agent.
func BuiltinDevices() map[string]Device {
	return map[string]Device{
		DefaultDevice: {Width: DesktopWidth, Height: DesktopHeight, Scale: 1},
		"mobile":      {Width: MobileWidth, Height: MobileHeight, Scale: MobileScale, Mobile: true, UserAgent: MobileUserAgentDefault},
	}
}

// LadderDefault is render.demand.ladder's default: a new slice on each call, since a slice
// cannot be a constant and a shared one could be changed by whoever holds a Config.
func LadderDefault() []Duration {
	return []Duration{Duration(6 * time.Hour), Duration(12 * time.Hour), Duration(day), Duration(2 * day)}
}

// page and sitemap
const (
	SWRTTLDefault          = Duration(3 * time.Hour)
	MaxWaitDefault         = Duration(30 * time.Second) // page.max_wait
	MaxWaitMax             = Duration(10 * time.Minute)
	MaxWaitersDefault      = 1000 // page.max_waiters
	MaxWaitersMax          = 1 << 20
	MinTTLDefault          = Duration(6 * time.Hour) // sitemap.min_ttl
	MaxDepthDefault        = 3                       // sitemap.max_depth
	MaxDepthMax            = 10
	MaxDecompressedDefault = ByteSize(256 << 20)
	RefetchDefault         = Duration(24 * time.Hour) // sitemap.refetch
	MaxSitemapURLs         = 100                      // sitemap.urls
)

// supervisor
const (
	RestartIntensityDefault = 5
	RestartPeriodDefault    = Duration(60 * time.Second)
	BackoffMinDefault       = Duration(100 * time.Millisecond)
	BackoffMaxDefault       = Duration(10 * time.Second)
	ShutdownTimeoutDefault  = Duration(30 * time.Second)
	ClusterLeaseTTLDefault  = Duration(10 * time.Second)
	ClusterLeaseTTLMin      = Duration(time.Second)
	ReadyTimeoutDefault     = Duration(60 * time.Second)
	WatchdogStallDefault    = Duration(30 * time.Second)
)

// http
const (
	MaxConnsDefault = 512
	MaxConnsMax     = 1 << 20
	// MaxUnauthenticatedDefault: an eighth of the default http.max_conns, so that eight peers
	// without a token leave room still; a middleware's fresh connections authenticate with
	// their first request and count only until then, so it may open this many at once.
	MaxUnauthenticatedDefault = 64
	ReadHeaderTimeoutDefault  = Duration(10 * time.Second)
	ReadTimeoutDefault        = Duration(time.Minute)
	WriteTimeoutDefault       = Duration(time.Minute)
	BulkTimeoutDefault        = Duration(10 * time.Minute)
	IdleTimeoutDefault        = Duration(2 * time.Minute)
)

// Default returns the configuration with every default filled in.
func Default() *Config { return (&Config{}).EnsureDefaults() }

// EnsureDefaults fills every unset field with its default and returns c. Fields where zero is a
// meaningful setting (ready.enabled, lane floors, fast retries) are pointers, so "unset" and
// "0" differ; Parse keeps the other meaningful zeros a file sets (see defaulted).
func (c *Config) EnsureDefaults() *Config {
	c.DataDir = cmp.Or(c.DataDir, DataDirDefault)
	c.Listen = cmp.Or(c.Listen, ListenDefault)
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.Log.Level = cmp.Or(c.Log.Level, LogLevelDefault)
	c.Log.Format = cmp.Or(c.Log.Format, LogFormatDefault)
	c.Store.Backend = cmp.Or(c.Store.Backend, StoreBackendDefault)
	c.Store.GCInterval = cmp.Or(c.Store.GCInterval, GCIntervalDefault)
	c.Store.ReadCache = cmp.Or(c.Store.ReadCache, ReadCacheDefault)
	c.Store.Postgres.Shards = cmp.Or(c.Store.Postgres.Shards, PostgresShardsDefault)

	c.Queue.ensureDefaults()
	c.Render.ensureDefaults()
	if c.Keys.DropParams == nil {
		c.Keys.DropParams = DropParamsDefault() // an explicit [] is kept: drop none
	}

	c.Page.SWRTTL = cmp.Or(c.Page.SWRTTL, SWRTTLDefault)
	c.Page.MaxWait = cmp.Or(c.Page.MaxWait, MaxWaitDefault)
	c.Page.MaxWaiters = cmp.Or(c.Page.MaxWaiters, MaxWaitersDefault)
	c.Page.MaxSiteWaiters = cmp.Or(c.Page.MaxSiteWaiters, (c.Page.MaxWaiters+3)/4)
	c.Sitemap.MinTTL = cmp.Or(c.Sitemap.MinTTL, MinTTLDefault)
	c.Sitemap.MaxDepth = cmp.Or(c.Sitemap.MaxDepth, MaxDepthDefault)
	c.Sitemap.MaxDecompressed = cmp.Or(c.Sitemap.MaxDecompressed, MaxDecompressedDefault)
	c.Sitemap.Refetch = cmp.Or(c.Sitemap.Refetch, RefetchDefault)

	c.Supervisor.ensureDefaults()
	c.Cluster.LeaseTTL = cmp.Or(c.Cluster.LeaseTTL, ClusterLeaseTTLDefault)
	c.HTTP.ensureDefaults()
	c.Freshness.ensureDefaults()
	c.Queue.Policy = cmp.Or(c.Queue.Policy, PolicyFreshness)
	c.Serve.ensureDefaults()
	c.Verdict.ensureDefaults()
	return c
}

// ensureDefaults sets every unset key of queue: to its default.
func (q *Queue) ensureDefaults() {
	q.LeaseTTL = cmp.Or(q.LeaseTTL, LeaseTTLDefault)
	q.MaxLeases = cmp.Or(q.MaxLeases, MaxLeasesDefault)
	q.MaxRemoteLeases = cmp.Or(q.MaxRemoteLeases, max(1, q.MaxLeases/MaxRemoteLeasesDivisor))
	q.ReleaseGrace = cmp.Or(q.ReleaseGrace, ReleaseGraceDefault)
	q.ClaimFloor.Guard = cmp.Or(q.ClaimFloor.Guard, GuardDefault)
	q.ClaimFloor.UnpinAfter = cmp.Or(q.ClaimFloor.UnpinAfter, UnpinAfterDefault)
	q.Ready.Enabled = cmp.Or(q.Ready.Enabled, ptr(ReadyEnabledDefault))
	q.Ready.Capacity = cmp.Or(q.Ready.Capacity, ReadyCapacityDefault)
	q.Ready.KeyCapacity = cmp.Or(q.Ready.KeyCapacity, KeyCapacityDefault)
	q.Ready.SweepInterval = cmp.Or(q.Ready.SweepInterval, SweepIntervalDefault)
	q.Ready.SweepCap = cmp.Or(q.Ready.SweepCap, SweepCapDefault)
	q.Ready.SubmittedBoost = cmp.Or(q.Ready.SubmittedBoost, SubmittedBoostDefault)
	q.Lanes.UrgentMaxShare = cmp.Or(q.Lanes.UrgentMaxShare, UrgentMaxShareDefault)
	q.Lanes.MinShare.Discovered = cmp.Or(q.Lanes.MinShare.Discovered, ptr(DiscoveredMinShareDefault))
	q.Lanes.MinShare.Cold = cmp.Or(q.Lanes.MinShare.Cold, ptr(ColdMinShareDefault))
}

// ensureDefaults sets every unset key of render: to its default.
func (r *Render) ensureDefaults() {
	r.Renderer = cmp.Or(r.Renderer, RendererDefault)
	// r.Concurrency stays 0 when unset: the value that runs depends on the renderer and the
	// cores (Config.RenderConcurrency), which a process resolves once at start.
	r.Timeout = cmp.Or(r.Timeout, TimeoutDefault)
	r.DefaultInterval = cmp.Or(r.DefaultInterval, IntervalDefault)
	r.UserAgent = cmp.Or(r.UserAgent, UserAgentDefault)
	r.UserAgentSuffix = cmp.Or(r.UserAgentSuffix, UserAgentSuffixDefault)
	r.MaxBody = cmp.Or(r.MaxBody, MaxBodyDefault)
	r.MaxRedirects = cmp.Or(r.MaxRedirects, MaxRedirectsDefault)
	r.Hosts.MaxConcurrency = cmp.Or(r.Hosts.MaxConcurrency, HostsMaxConcurrencyDefault)
	r.Hosts.MaxPause = cmp.Or(r.Hosts.MaxPause, HostsMaxPauseDefault)
	r.Hosts.HalveAfter = cmp.Or(r.Hosts.HalveAfter, HostsHalveAfterDefault)
	r.Hosts.GrowAfter = cmp.Or(r.Hosts.GrowAfter, HostsGrowAfterDefault)
	r.Sim.Seed = cmp.Or(r.Sim.Seed, SimSeedDefault)
	ch := &r.Chrome
	ch.Path = cmp.Or(ch.Path, ChromePathDefault)
	ch.Idle = cmp.Or(ch.Idle, ChromeIdleDefault)
	ch.Settle = cmp.Or(ch.Settle, min(ChromeSettleDefault, ch.Idle)) // a configured idle below the default settle is kept
	ch.LongRequest = cmp.Or(ch.LongRequest, ChromeLongRequestDefault)
	ch.DataWait = cmp.Or(ch.DataWait, ChromeDataWaitDefault)
	ch.CacheMaxAge = cmp.Or(ch.CacheMaxAge, ChromeCacheMaxAgeDefault)
	ch.BlockThirdParties = cmp.Or(ch.BlockThirdParties, ptr(true))
	if ch.BlockTypes == nil {
		ch.BlockTypes = ChromeBlockTypesDefault()
	}
	ch.RecycleAfter = cmp.Or(ch.RecycleAfter, ChromeRecycleAfterDefault)
	ch.MaxRSS = cmp.Or(ch.MaxRSS, ChromeMaxRSSDefault)
	ch.User = cmp.Or(ch.User, ChromeUserDefault)
	ch.Nice = cmp.Or(ch.Nice, ChromeNiceDefault)
	f := &r.FailureRetry
	f.FastRetries = cmp.Or(f.FastRetries, ptr(FastRetriesDefault))
	f.FastDelay = cmp.Or(f.FastDelay, FastDelayDefault)
	f.Factor = cmp.Or(f.Factor, FactorDefault)
	f.MaxBackoff = cmp.Or(f.MaxBackoff, MaxBackoffDefault)
	f.NonSitemapPenalty = cmp.Or(f.NonSitemapPenalty, NonSitemapPenaltyDefault)
	r.Suppression.Noindex.Strikes = cmp.Or(r.Suppression.Noindex.Strikes, NoindexStrikesDefault)
	r.Suppression.Noindex.Recheck = cmp.Or(r.Suppression.Noindex.Recheck, NoindexRecheckDefault)
	r.Suppression.Gone.Strikes = cmp.Or(r.Suppression.Gone.Strikes, GoneStrikesDefault)
	r.Suppression.Gone.Recheck = cmp.Or(r.Suppression.Gone.Recheck, GoneRecheckDefault)
	if len(r.Demand.Ladder) == 0 {
		r.Demand.Ladder = LadderDefault()
	}
}

// ensureDefaults sets every unset key of supervisor: to its default.
func (s *Supervisor) ensureDefaults() {
	s.RestartIntensity = cmp.Or(s.RestartIntensity, RestartIntensityDefault)
	s.RestartPeriod = cmp.Or(s.RestartPeriod, RestartPeriodDefault)
	s.BackoffMin = cmp.Or(s.BackoffMin, BackoffMinDefault)
	s.BackoffMax = cmp.Or(s.BackoffMax, BackoffMaxDefault)
	s.ShutdownTimeout = cmp.Or(s.ShutdownTimeout, ShutdownTimeoutDefault)
	s.ReadyTimeout = cmp.Or(s.ReadyTimeout, ReadyTimeoutDefault)
	s.WatchdogStall = cmp.Or(s.WatchdogStall, WatchdogStallDefault)
}

// ensureDefaults sets every unset key of http: to its default.
func (h *HTTP) ensureDefaults() {
	h.MaxConns = cmp.Or(h.MaxConns, MaxConnsDefault)
	h.MaxUnauthenticated = cmp.Or(h.MaxUnauthenticated, min(MaxUnauthenticatedDefault, h.MaxConns))
	h.ReadHeaderTimeout = cmp.Or(h.ReadHeaderTimeout, ReadHeaderTimeoutDefault)
	h.ReadTimeout = cmp.Or(h.ReadTimeout, ReadTimeoutDefault)
	h.WriteTimeout = cmp.Or(h.WriteTimeout, WriteTimeoutDefault)
	h.BulkTimeout = cmp.Or(h.BulkTimeout, BulkTimeoutDefault)
	h.IdleTimeout = cmp.Or(h.IdleTimeout, IdleTimeoutDefault)
}

// ensureDefaults sets every unset key of freshness: to its default (queue.policy is the
// Config's, which names freshness the default).
func (fr *Freshness) ensureDefaults() {
	fr.Normalize = cmp.Or(fr.Normalize, ptr(FreshnessNormalizeDefault))
	fr.RequestTau = cmp.Or(fr.RequestTau, FreshnessRequestTauDefault)
	fr.DemandFlush = cmp.Or(fr.DemandFlush, FreshnessDemandFlushDefault)
	fr.Requests = cmp.Or(fr.Requests, FreshnessRequestsDefault)
	fr.Threshold = cmp.Or(fr.Threshold, FreshnessThresholdDefault)
	fr.PriorWeight = cmp.Or(fr.PriorWeight, FreshnessPriorWeightDefault)
	fr.StretchFactor = cmp.Or(fr.StretchFactor, FreshnessStretchFactorDefault)
	fr.ConditionalEvery = cmp.Or(fr.ConditionalEvery, FreshnessConditionalEveryDefault)
	fr.ConditionalMaxAge = cmp.Or(fr.ConditionalMaxAge, FreshnessConditionalMaxAgeDefault)
}

// ensureDefaults sets every unset key of serve: to its default.
func (sv *Serve) ensureDefaults() {
	sv.Wait = cmp.Or(sv.Wait, ServeWaitDefault)
	sv.MissRate = cmp.Or(sv.MissRate, ServeMissRateDefault)
	sv.MissBurst = cmp.Or(sv.MissBurst, ServeMissBurstDefault)
	sv.DemandBytes = cmp.Or(sv.DemandBytes, ServeDemandBytesDefault)
	if sv.TrustedProxies == nil {
		sv.TrustedProxies = ServeTrustedProxiesDefault()
	}
	sv.VerifyCrawlers = cmp.Or(sv.VerifyCrawlers, ptr(sv.ClientIPHeader != ""))
	vf := &sv.Verify
	vf.Timeout = cmp.Or(vf.Timeout, ServeVerifyTimeoutDefault)
	vf.Concurrency = cmp.Or(vf.Concurrency, ServeVerifyConcurrencyDefault)
	vf.CacheEntries = cmp.Or(vf.CacheEntries, ServeVerifyCacheEntriesDefault)
	vf.CacheTTL = cmp.Or(vf.CacheTTL, ServeVerifyCacheTTLDefault)
}

// The crawler listener's defaults (serve.*). serve.wait is the prerender server's own page
// timeout: a middleware gives up about then.
const (
	ServeWaitDefault      = Duration(20 * time.Second)
	ServeMissRateDefault  = 1.0 // new targets a second per host
	ServeMissBurstDefault = 20
	ServeMissBurstMax     = 100_000
	// serve.demand_bytes: 128 MiB holds the counts of about 400,000 pages of 100-byte URLs
	// (a third each for the two generations and the counts pending a flush), of 20,000 of
	// the longest keys the store accepts.
	ServeDemandBytesDefault = ByteSize(128 << 20)
	ServeDemandBytesMin     = ByteSize(1 << 20)
	ServeDemandBytesMax     = ByteSize(16 << 30)
)

// ServeTrustedProxiesDefault is serve.trusted_proxies' default: loopback, where a middleware or
// nginx on the same machine connects from.
func ServeTrustedProxiesDefault() []string { return []string{"127.0.0.0/8", "::1/128"} }

// Crawler verification's defaults and bounds (serve.verify.*). A search engine's resolver
// answers in milliseconds; two seconds leaves a slow one room and costs a crawler that is
// not verified no more than that once a TTL. 65,536 verdicts hold every address a day of
// real crawlers comes from, in a few MiB.
const (
	ServeVerifyTimeoutDefault      = Duration(2 * time.Second)
	ServeVerifyTimeoutMax          = Duration(30 * time.Second)
	ServeVerifyConcurrencyDefault  = 64
	ServeVerifyConcurrencyMax      = 4096
	ServeVerifyCacheEntriesDefault = 65_536
	ServeVerifyCacheEntriesMax     = 10_000_000
	ServeVerifyCacheTTLDefault     = Duration(time.Hour)
	ServeVerifyCacheTTLMax         = Duration(7 * 24 * time.Hour)
)

// CrawlerFamilies are the family names serve.crawlers may use (package crawlers' Families; a
// test pins the two equal): the family label's values, a fixed set whatever the table.
func CrawlerFamilies() []string {
	return []string{"google", "bing", "apple", "yandex", "baidu", "duckduckgo", "openai", "anthropic", "perplexity", "commoncrawl", "social", "other"}
}

// Freshness of content (freshness.*).
const (
	FreshnessNormalizeDefault   = true                     // pages are normalised before they are digested
	FreshnessRequestTauDefault  = Duration(24 * time.Hour) // request counts decay over a day
	FreshnessDemandFlushDefault = Duration(time.Minute)    // counted requests reach the targets every minute
	FreshnessRequestsDefault    = 0.1                      // requests an hour of a page never requested
	FreshnessThresholdDefault   = 1.0                      // a render that prevents one stale serve is due
	FreshnessPriorWeightDefault = 1.0                      // the route's prior counts as one render
	// under scarcity a page's ceiling is ready's projected longest interval, never past it
	FreshnessStretchFactorDefault = 1.0
	FreshnessStretchFactorMax     = 16.0
	// a page is rendered in full at least every 10th time, and at least weekly
	FreshnessConditionalEveryDefault  = 10
	FreshnessConditionalMaxAgeDefault = Duration(7 * 24 * time.Hour)
)

func ptr[T any](v T) *T { return &v }

// RenderConcurrency is a render worker's renders in flight on a machine of cores cores (the
// process's runtime.GOMAXPROCS, which follows the cgroup's CPU quota; the caller reads it once,
// this function never reads the machine). A render.concurrency the file sets wins. Absent (or 0),
// the chrome renderer's is derived: ChromePagesPerCore a core for the whole node, shared out
// between its render workers (workers − 1, separate processes on the same cores), rounded down,
// at least ConcurrencyDerivedMin. The other renderers wait on their origin, not on the CPU, so
// cores say nothing of how many of their renders fit: they keep ConcurrencyDefault.
func (c *Config) RenderConcurrency(cores int) int {
	if c.Render.Concurrency > 0 {
		return c.Render.Concurrency
	}
	if c.Render.Renderer != "chrome" {
		return ConcurrencyDefault
	}
	renderWorkers := max(c.Workers-1, 1)
	return min(max(ChromePagesPerCore*max(cores, 1)/renderWorkers, ConcurrencyDerivedMin), ConcurrencyMax)
}
