// Package config is freshq's typed configuration: one YAML file, decoded strictly (an unknown
// key is an error with its line number), every value defaulted and validated at load and on
// reload. A Config is immutable once loaded: a reload builds a new one, and callers swap the
// pointer, so a half-applied configuration never exists. A bad reload leaves the old Config in
// force and says why.
//
// Validation rejects values that cannot work, not just values out of range: a render timeout
// at or above the lease TTL makes every slow render a duplicate, so it is refused at load. It
// reports every bad value of a file at once (FieldErrors), each with its line.
//
// Each default and each bound that is a choice is one named constant (defaults.go), read by
// EnsureDefaults and Validate alike; docs/CONFIGURATION.md's table is tested against Default().
//
// Reading the file is bounded by its size (nesting depth and alias expansion, checked before
// anything decodes) and every error names its line: both are config/yamlfile's job.
//
// Of freshq it imports cachekey, whose rules for device names and cache keys it applies, wire,
// the leaves verdict, which compiles routes[].expect so that a bad selector is refused at load,
// and crawlers, whose table serve.crawlers is checked against, and its own config/yamlfile.
package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config/yamlfile"
	"github.com/freshq/freshq/wire"
)

// ErrInvalid wraps every load and validation failure.
var ErrInvalid = errors.New("config: invalid")

// MaxPageBody is the largest page body the store keeps (store.MaxPageBody; this package does
// not import the store, and a test in cmd/worker pins the two equal): render.max_body may not
// exceed it, or every larger page would fail its whole result batch.
const MaxPageBody = 32 << 20

// Config is the whole configuration. Field comments give the YAML key and name the default
// (defaults.go).
type Config struct {
	DataDir    string     `yaml:"data_dir"`   // DataDirDefault
	Listen     string     `yaml:"listen"`     // ListenDefault
	Workers    int        `yaml:"workers"`    // WorkersDefault: worker 0 (store) + render workers
	Token      string     `yaml:"token"`      // bearer token; FRESHQ_TOKEN overrides; required beyond loopback
	SHM        SHM        `yaml:"shm"`        //
	Log        Log        `yaml:"log"`        //
	Store      Store      `yaml:"store"`      //
	Queue      Queue      `yaml:"queue"`      //
	Render     Render     `yaml:"render"`     //
	Routes     []Route    `yaml:"routes"`     // ordered; first match wins
	Keys       Keys       `yaml:"keys"`       // how a submitted URL becomes its cache key
	Page       Page       `yaml:"page"`       //
	Sitemap    Sitemap    `yaml:"sitemap"`    //
	Supervisor Supervisor `yaml:"supervisor"` //
	HTTP       HTTP       `yaml:"http"`       // the public listener
	Node       Node       `yaml:"node"`       // this node's identity in a cluster
	Cluster    Cluster    `yaml:"cluster"`    // shard leases, with store.backend postgres
	Serve      Serve      `yaml:"serve"`      // the crawler-facing listener
	Freshness  Freshness  `yaml:"freshness"`  // freshness of content: change and demand observed
	Verdict    Verdict    `yaml:"verdict"`    // how a completed render is judged before it is applied
}

// Freshness configures freshness of content: how a render's content is told changed or not
// from the previous render's (package pagedigest), and how crawler demand is kept.
type Freshness struct {
	// Normalize, true by default, strips what changes on every load (nonces, CSRF tokens,
	// date-times, asset cache-busters) before a page is digested; routes[].strip adds to it.
	Normalize *bool `yaml:"normalize"`
	// RequestTau is the longest time scale of a page's request rate
	// (FreshnessRequestTauDefault): a flush moves the rate on the time the page takes to be
	// asked freshness.RequestMemory times, at most this (freshness.Counter).
	RequestTau Duration `yaml:"request_tau"`
	// DemandFlush is how often worker 0 writes the requests counted since into the targets,
	// in one batch (FreshnessDemandFlushDefault).
	DemandFlush Duration `yaml:"demand_flush"`
	// Requests is the request rate, per hour, a page never requested is taken to have
	// (FreshnessRequestsDefault), unless its route says (routes[].requests).
	Requests float64 `yaml:"requests"`
	// Threshold is, under queue.policy freshness, the starting threshold: how many stale
	// serves a render must prevent (its marginal value) for the page to be due before its
	// ceiling, until worker 0 has measured its capacity and tunes the threshold to it
	// (capacity.TuneFreshness) (FreshnessThresholdDefault).
	Threshold float64 `yaml:"threshold"`
	// PriorWeight is how many renders the route's change_interval counts as
	// (FreshnessPriorWeightDefault): a page's own renders outweigh it after about as many.
	PriorWeight float64 `yaml:"prior_weight"`
	// StretchFactor is, under queue.policy freshness and scarcity, how far past ready's
	// projected longest interval a page's ceiling may be (FreshnessStretchFactorDefault: 1,
	// never past it): the ceiling is the route's interval × (1 + (S − 1) × StretchFactor),
	// S the stretch ready is projected to leave the route at (capacity.TuneFreshness).
	StretchFactor float64 `yaml:"stretch_factor"`
	// ConditionalEvery bounds conditional checks: before rendering a page whose origin sent
	// validators (ETag, Last-Modified), a render worker asks the origin with If-None-Match /
	// If-Modified-Since, and a 304 counts as unchanged without a render; at least every
	// ConditionalEvery-th time the page is rendered in full (FreshnessConditionalEveryDefault;
	// 1 = never check, always render).
	ConditionalEvery int `yaml:"conditional_every"`
	// ConditionalMaxAge: a page last rendered in full longer ago is rendered in full, whatever
	// its origin answers (FreshnessConditionalMaxAgeDefault).
	ConditionalMaxAge Duration `yaml:"conditional_max_age"`
}

// Serve configures the crawler-facing listener: the prerender protocol (GET /{absolute URL},
// GET /render/{url}, GET /render?url=) that prerender middlewares speak, served from the stored
// pages by worker 0 (package serve).
type Serve struct {
	// Listen is the listener's address (":3000"); empty, the default, serves no crawler.
	Listen string `yaml:"listen"`
	// Tokens are the X-Prerender-Token values accepted there: read-only, never the admin token.
	// Required when Listen is beyond loopback.
	Tokens []string `yaml:"tokens"`
	// Wait is how long a request for a missing page waits for its render on miss
	// (ServeWaitDefault, at most MaxWaitMax).
	Wait Duration `yaml:"wait"`
	// MissRate is how many new targets a second misses may create per host
	// (ServeMissRateDefault), with a burst of MissBurst (ServeMissBurstDefault); past it, 503.
	MissRate  float64 `yaml:"miss_rate"`
	MissBurst int     `yaml:"miss_burst"`
	// MobileAgents, when set, replaces the device patterns of the crawler table (package
	// crawlers' families.yaml: Mobile, Android, iPhone): User-Agent substrings
	// (case-insensitive) that make a request's device mobile, unless its family names a
	// device; any other is desktop. Unset (nil), the table's; [] makes none mobile.
	MobileAgents []string `yaml:"mobile_agents"`
	// DemandBytes bounds the memory worker 0 counts crawler requests per stored page in
	// (ServeDemandBytesDefault, ServeDemandBytesMin..ServeDemandBytesMax): keys up to the
	// store's key limit long, so bounded by bytes, not keys. Read when the listener starts.
	DemandBytes ByteSize `yaml:"demand_bytes"`
	// ClientIPHeader names the header the site's middleware carries the client's address in
	// (X-Forwarded-For, CF-Connecting-IP, X-Real-IP); empty, the default, takes the peer's.
	// It is read only from a peer in TrustedProxies, right to left, and its right-most address
	// that is no trusted proxy is the client's (package crawlers).
	ClientIPHeader string `yaml:"client_ip_header"`
	// TrustedProxies are the peers (CIDRs) whose ClientIPHeader is believed, and the hops of
	// it skipped (ServeTrustedProxiesDefault: loopback).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// VerifyCrawlers verifies a request whose User-Agent claims a crawler that documents a
	// verification: an unverified one is served stored pages only, and costs no render on
	// miss. Default: on when ClientIPHeader is set (behind a middleware the peer is the
	// middleware, whose address verifies nothing).
	VerifyCrawlers *bool `yaml:"verify_crawlers"`
	// Verify bounds the lookups of verification.
	Verify ServeVerify `yaml:"verify"`
	// Crawlers replaces the crawler families shipped with freshq (crawlers/families.yaml):
	// each family's User-Agent substrings, its verification and, optionally, the device its
	// crawlers render as. Empty: the shipped families.
	Crawlers []CrawlerFamily `yaml:"crawlers"`
}

// ServeVerify bounds crawler verification (serve.verify.*).
type ServeVerify struct {
	// Timeout bounds one verification, its reverse and forward lookups and its wait for a
	// lookup slot (ServeVerifyTimeoutDefault): past it the request is unverified.
	Timeout Duration `yaml:"timeout"`
	// Concurrency is how many lookups run at once (ServeVerifyConcurrencyDefault).
	Concurrency int `yaml:"concurrency"`
	// CacheEntries bounds the verdicts kept, one per family and address
	// (ServeVerifyCacheEntriesDefault); read when the listener starts.
	CacheEntries int `yaml:"cache_entries"`
	// CacheTTL is how long a verdict, positive or negative, is kept (ServeVerifyCacheTTLDefault).
	CacheTTL Duration `yaml:"cache_ttl"`
}

// CrawlerFamily is one family of serve.crawlers: a family's name (one of CrawlerFamilies),
// the User-Agent substrings that claim it, and its verification.
type CrawlerFamily struct {
	Family     string   `yaml:"family"`
	Agents     []string `yaml:"agents"`
	ReverseDNS []string `yaml:"reverse_dns"` // reverse-name suffixes, confirmed forward
	Ranges     []string `yaml:"ranges"`      // CIDRs the family publishes
	// Device, when given, is the device every crawler of the family renders as (one of
	// render's devices), whatever serve.mobile_agents or the shipped device patterns say.
	Device string `yaml:"device"`
}

// Node names this node among the nodes that share one PostgreSQL database.
type Node struct {
	// ID is the node's identity: its heartbeat row and the owner of its shard leases. Empty
	// (the default) is "<hostname>:<listen>", unique per process on a network. A second process
	// that starts under the identity of a live node is refused.
	ID string `yaml:"id"`
}

// Cluster configures shard ownership, which runs whenever store.backend is postgres (one node
// alone owns every shard).
type Cluster struct {
	// LeaseTTL is how long a shard lease and a node's heartbeat last without renewal
	// (ClusterLeaseTTLDefault, at least ClusterLeaseTTLMin). A node renews every LeaseTTL/4; a
	// node that stops renewing loses its shards to the live nodes after LeaseTTL.
	LeaseTTL Duration `yaml:"lease_ttl"`
}

// SHM locates the shared-memory segment.
type SHM struct {
	// Path is the segment file. Empty (the default) puts it in the supervisor's private runtime
	// directory ($RUNTIME_DIRECTORY under systemd, else /dev/shm/freshq-<uid>/), named after the
	// data directory, next to worker 0's control socket.
	Path string `yaml:"path"`
}

// Log configures zerolog output on stderr.
type Log struct {
	Level  string `yaml:"level"`  // LogLevelDefault
	Format string `yaml:"format"` // json | console; LogFormatDefault
}

// Store configures the schedule store: the embedded Badger store under data_dir (the default),
// or PostgreSQL.
type Store struct {
	Backend    string   `yaml:"backend"`     // badger | postgres; StoreBackendDefault
	SyncWrites bool     `yaml:"sync_writes"` // badger: false survives kill -9; true: fsync per batch, survives power loss
	GCInterval Duration `yaml:"gc_interval"` // badger: GCIntervalDefault
	// ReadCache bounds the badger store's cache of the values read most (pages crawlers ask
	// for, their rows): ReadCacheDefault; 0 keeps none.
	ReadCache ByteSize `yaml:"read_cache"`
	Postgres  Postgres `yaml:"postgres"`
}

// Postgres configures the PostgreSQL store (store/pgstore).
type Postgres struct {
	// DSN names the database (a libpq keyword string or a postgres:// URL). The environment
	// variable FRESHQ_PG_DSN, when set, replaces it: a password is better kept out of a file.
	DSN string `yaml:"dsn"`
	// Shards is the number of shards a new schema divides keys into; an existing schema keeps
	// the number it was created with.
	Shards int `yaml:"shards"` // PostgresShardsDefault, PostgresShardsMin..PostgresShardsMax
}

// PostgresDSNEnv is the environment variable that supplies store.postgres.dsn.
const PostgresDSNEnv = "FRESHQ_PG_DSN"

// Queue configures claiming, leasing, the floor and the ready set.
type Queue struct {
	LeaseTTL     Duration   `yaml:"lease_ttl"`     // LeaseTTLDefault, at least LeaseTTLMin
	MaxLeases    int        `yaml:"max_leases"`    // MaxLeasesDefault
	ReleaseGrace Duration   `yaml:"release_grace"` // ReleaseGraceDefault
	ClaimFloor   ClaimFloor `yaml:"claim_floor"`
	Ready        Ready      `yaml:"ready"`
	Lanes        Lanes      `yaml:"lanes"`
	// MaxRemoteLeases caps the live leases of one remote renderer (POST /v1/claim), so that
	// no remote can fill the table and starve the local render workers.
	MaxRemoteLeases int `yaml:"max_remote_leases"` // max_leases / MaxRemoteLeasesDivisor
	// Policy is when a rendered page is due again: freshness (PolicyFreshness, the default:
	// once a render would prevent the tuned threshold of stale serves, within the route's
	// min_interval and its ceiling) or ready (PolicyReady: one cadence after its render).
	Policy string `yaml:"policy"`
}

// The values of queue.policy.
const (
	PolicyReady     = "ready"
	PolicyFreshness = "freshness"
)

// ClaimFloor configures the floor: how far it stays behind the first due row, and when the
// row pinning it is filed forward (store's package doc; docs/ARCHITECTURE.md, Invariants).
type ClaimFloor struct {
	Guard      Duration `yaml:"guard"`       // GuardDefault
	UnpinAfter Duration `yaml:"unpin_after"` // UnpinAfterDefault
}

// Ready configures the sweep and the ready set it publishes (sweep's package doc;
// docs/ARCHITECTURE.md, A target's journey).
type Ready struct {
	Enabled        *bool    `yaml:"enabled"`         // ReadyEnabledDefault; false sends every claim to the index scan
	Capacity       int      `yaml:"capacity"`        // ReadyCapacityDefault entries per slot
	KeyCapacity    int      `yaml:"key_capacity"`    // KeyCapacityDefault bytes; longer keys skip the ready set
	SweepInterval  Duration `yaml:"sweep_interval"`  // SweepIntervalDefault
	SweepCap       int      `yaml:"sweep_cap"`       // SweepCapDefault rows
	SubmittedBoost float64  `yaml:"submitted_boost"` // SubmittedBoostDefault; "sitemap_boost" is accepted too (keyAliases)
}

// Lanes configures lane shares within a published set (policy's package doc;
// docs/ARCHITECTURE.md, Glossary: lane).
type Lanes struct {
	UrgentMaxShare float64  `yaml:"urgent_max_share"` // UrgentMaxShareDefault
	MinShare       MinShare `yaml:"min_share"`
}

// MinShare is the floor of each protected lane.
type MinShare struct {
	Discovered *float64 `yaml:"discovered"` // DiscoveredMinShareDefault
	Cold       *float64 `yaml:"cold"`       // ColdMinShareDefault
}

// Render configures renderers and what a render's outcome does to a row.
type Render struct {
	Renderer        string            `yaml:"renderer"`          // http | exec | chrome | sim; RendererDefault
	Concurrency     int               `yaml:"concurrency"`       // renders in flight per render worker; 0: derived (Config.RenderConcurrency)
	Timeout         Duration          `yaml:"timeout"`           // TimeoutDefault; must be below queue.lease_ttl
	DefaultInterval Duration          `yaml:"default_interval"`  // IntervalDefault
	Domains         []string          `yaml:"domains"`           // allowlist of hosts (and their subdomains); empty = any host
	UserAgent       string            `yaml:"user_agent"`        // UserAgentDefault
	UserAgents      map[string]string `yaml:"user_agents"`       // per device, e.g. mobile: "…"; a device not listed gets user_agent
	UserAgentSuffix string            `yaml:"user_agent_suffix"` // UserAgentSuffixDefault: ends every render's User-Agent (Marked)
	MaxBody         ByteSize          `yaml:"max_body"`          // MaxBodyDefault, at most MaxPageBody
	MaxRedirects    int               `yaml:"max_redirects"`     // MaxRedirectsDefault
	Exec            Exec              `yaml:"exec"`
	Chrome          Chrome            `yaml:"chrome"`
	Devices         map[string]Device `yaml:"devices"` // the chrome renderer's devices besides (or replacing) the built-in desktop and mobile
	Sim             Sim               `yaml:"sim"`
	FailureRetry    FailureRetry      `yaml:"failure_retry"`
	Suppression     Suppression       `yaml:"suppression"`
	Demand          Demand            `yaml:"demand"`
	Hosts           Hosts             `yaml:"hosts"`
}

// Hosts is politeness towards the sites being rendered: how many renders of one host may be in
// flight on the node at once, and how a host's answers lower that (package hosts).
type Hosts struct {
	MaxConcurrency int            `yaml:"max_concurrency"` // HostsMaxConcurrencyDefault renders in flight per host, across the node's render workers
	Overrides      map[string]int `yaml:"overrides"`       // per host (as in the URL: host[:port]), instead of max_concurrency
	MaxPause       Duration       `yaml:"max_pause"`       // HostsMaxPauseDefault: the longest pause a Retry-After can ask for
	HalveAfter     int            `yaml:"halve_after"`     // HostsHalveAfterDefault consecutive 5xx or timeouts halve the host's limit
	GrowAfter      int            `yaml:"grow_after"`      // HostsGrowAfterDefault consecutive successes raise it by one, up to its maximum
}

// Max is the most renders of host that may be in flight at once: its override, else
// max_concurrency.
func (h *Hosts) Max(host []byte) int {
	if n, ok := h.Overrides[string(host)]; ok {
		return n
	}
	return h.MaxConcurrency
}

// Exec runs a command per URL; the URL is the last argument, never passed through a shell.
type Exec struct {
	Command []string `yaml:"command"`
}

// ChromeAllow is an entry of render.chrome.allow: the pages whose URL path Match and Path take
// (exact, prefix or contains, as routes) may load Load: a resource type (as block_types names
// them) lifts that type's block; a URL pattern (as block's) lets matching URLs through block and
// block_types both. Nothing lifts render.domains or the address policy.
type ChromeAllow struct {
	Match string   `yaml:"match"`
	Path  string   `yaml:"path"`
	Load  []string `yaml:"load"`
}

// Chrome configures the chrome renderer: one long-lived headless Chromium per render worker,
// driven over the DevTools protocol (render's package doc says what it guarantees).
type Chrome struct {
	Path        string   `yaml:"path"`          // ChromePathDefault: the browser's executable, in PATH or a path
	Idle        Duration `yaml:"idle"`          // ChromeIdleDefault of network quiet after the load event that makes a page ready
	Settle      Duration `yaml:"settle"`        // ChromeSettleDefault of quiet after the page's own data requests were answered that makes it ready; at most idle
	LongRequest Duration `yaml:"long_request"`  // ChromeLongRequestDefault: a request in flight longer than this no longer keeps a page from being idle
	DataWait    Duration `yaml:"data_wait"`     // ChromeDataWaitDefault: how long a same-site XHR or fetch in flight keeps holding a page (past it, a long-poll)
	CacheMaxAge Duration `yaml:"cache_max_age"` // ChromeCacheMaxAgeDefault: the browser's cache is cleared before a render when it was last cleared longer ago; 0: never by age
	BlockTypes  []string `yaml:"block_types"`   // ChromeBlockTypesDefault(): resource types refused before they load
	Block       []string `yaml:"block"`         // URL patterns refused before they load; * matches any run of characters
	// BlockThirdParties (absent: true) refuses ChromeThirdParties() besides Block.
	BlockThirdParties *bool `yaml:"block_third_parties"`
	// Allow lets what block_types and block refuse load for some pages: the first entry whose
	// match takes the page's URL path (as routes match) is the page's, and what it names loads.
	Allow        []ChromeAllow `yaml:"allow"`
	KeepScripts  bool          `yaml:"keep_scripts"`  // false: <script> elements are removed from the captured page
	RecycleAfter int           `yaml:"recycle_after"` // ChromeRecycleAfterDefault renders, then the browser is restarted
	MaxRSS       ByteSize      `yaml:"max_rss"`       // ChromeMaxRSSDefault: the browser's resident memory (all its processes) that restarts it
	User         string        `yaml:"user"`          // ChromeUserDefault: the account the browser runs as when the worker runs as root
	NoSandbox    bool          `yaml:"no_sandbox"`    // true runs Chromium without its sandbox: only where it cannot start one
	// Nice (ChromeNiceDefault, 0..19) is added to the worker's niceness for the browser and
	// every process it forks, so that worker 0's serving and store come first; 0: the worker's.
	Nice int `yaml:"nice"`
}

// Device is how the chrome renderer presents itself for one device: its viewport, user agent
// and mobile emulation.
type Device struct {
	Width     int     `yaml:"width"`      // CSS pixels, 1..DeviceSizeMax
	Height    int     `yaml:"height"`     // CSS pixels, 1..DeviceSizeMax
	Scale     float64 `yaml:"scale"`      // device pixel ratio; 0 is 1
	Mobile    bool    `yaml:"mobile"`     // mobile emulation: meta viewport honoured, touch events
	UserAgent string  `yaml:"user_agent"` // empty: render.user_agents.<device>, else render.user_agent
}

// Sim is the simulated renderer used by benchmarks and the demo.
type Sim struct {
	Seed          int64    `yaml:"seed"`           // SimSeedDefault
	LatencyMedian Duration `yaml:"latency_median"` // 0s
	TransientRate float64  `yaml:"transient_rate"` // 0
	GoneRate      float64  `yaml:"gone_rate"`      // 0
	NoindexRate   float64  `yaml:"noindex_rate"`   // 0
}

// FailureRetry is the transient-failure backoff.
type FailureRetry struct {
	FastRetries       *int     `yaml:"fast_retries"`        // FastRetriesDefault
	FastDelay         Duration `yaml:"fast_delay"`          // FastDelayDefault
	Factor            float64  `yaml:"factor"`              // FactorDefault
	MaxBackoff        Duration `yaml:"max_backoff"`         // MaxBackoffDefault
	NonSitemapPenalty float64  `yaml:"non_sitemap_penalty"` // NonSitemapPenaltyDefault
}

// Suppression seals deterministic failures by their cause, after evidence.
type Suppression struct {
	Noindex Strikes `yaml:"noindex"` // NoindexStrikesDefault, NoindexRecheckDefault
	Gone    Strikes `yaml:"gone"`    // 404/410: GoneStrikesDefault, GoneRecheckDefault
}

// Strikes is how many consecutive observations seal a state, and when it is checked again.
type Strikes struct {
	Strikes int      `yaml:"strikes"`
	Recheck Duration `yaml:"recheck"`
}

// Demand is the ladder visited pages are promoted along, under the route's ceiling.
type Demand struct {
	Ladder []Duration `yaml:"ladder"` // LadderDefault()
}

// Route classifies targets by URL path. The first route that matches wins.
type Route struct {
	Name     string   `yaml:"name"`
	Match    string   `yaml:"match"`    // exact | prefix | contains
	Path     string   `yaml:"path"`     // the pattern, matched against the URL path
	Interval Duration `yaml:"interval"` // the route's cadence and ceiling; 0 = none
	SWR      Duration `yaml:"swr"`      // stale-while-revalidate window; 0 = page.swr_ttl
	// KeepParams, when set, is the allowlist of query parameters (globs, as keys.drop_params)
	// the keys of the route's URLs keep: every other one is dropped.
	KeepParams []string `yaml:"keep_params"`
	// TrailingSlash is keep (the default), add or strip: what the keys of the route's URLs do
	// with a trailing "/" ("/" itself is never touched).
	TrailingSlash string `yaml:"trailing_slash"`
	// ServeStale, false, has the crawler listener treat a page past its cadence plus swr as
	// missing (rendered on miss) instead of serving it marked stale; absent is true.
	ServeStale *bool `yaml:"serve_stale"`
	// Strip are regular expressions whose matches are removed from the route's rendered pages
	// before they are digested to tell a change of content (after freshness.normalize's).
	Strip []string `yaml:"strip"`
	// Requests is the request rate, per hour, the route's pages are taken to have before any
	// is counted; 0 = freshness.requests.
	Requests float64 `yaml:"requests"`
	// MinInterval is the least time between two renders of a page of the route under
	// queue.policy freshness; 0 = its cadence ÷ MinIntervalDivisor.
	MinInterval Duration `yaml:"min_interval"`
	// ChangeInterval is how often the route's pages are taken to change before their own
	// renders tell (the estimator's prior); 0 = the cadence.
	ChangeInterval Duration `yaml:"change_interval"`
	// Expect is what every good page of the route has (a selector, a text): a render without
	// it is suspect and does not replace the page.
	Expect RouteExpect `yaml:"expect"`
}

// MinIntervalDivisor: a route without min_interval is rendered at most every cadence ÷ 16
// under queue.policy freshness.
const MinIntervalDivisor = 16

// Keys configures cache-key normalisation (cachekey.Rules), which every URL taken from outside
// goes through. Changing it changes the keys of stored targets: freshqctl keys check counts
// them, freshqctl keys migrate moves them.
type Keys struct {
	// DropParams are the query parameters every key drops, as globs ("*" matches any run of
	// characters): DropParamsDefault(); [] drops none.
	DropParams []string `yaml:"drop_params"`
}

// Page configures serving stored pages.
type Page struct {
	SWRTTL     Duration `yaml:"swr_ttl"`     // SWRTTLDefault
	MaxWait    Duration `yaml:"max_wait"`    // MaxWaitDefault: the longest ?wait= GET /v1/pages accepts
	MaxWaiters int      `yaml:"max_waiters"` // MaxWaitersDefault requests waiting for a render on miss at once
	// MaxSiteWaiters bounds the requests waiting for renders of one site's pages; 0 is
	// ⌈max_waiters ÷ 4⌉, so that one site cannot hold every slot.
	MaxSiteWaiters int `yaml:"max_site_waiters"`
}

// Sitemap configures sitemap ingest.
type Sitemap struct {
	MinTTL          Duration `yaml:"min_ttl"`          // MinTTLDefault: floor for <changefreq> cadences
	MaxDepth        int      `yaml:"max_depth"`        // MaxDepthDefault levels of index files
	MaxDecompressed ByteSize `yaml:"max_decompressed"` // MaxDecompressedDefault per file: a zip bomb is refused
	// URLs are the site's sitemaps, read at start and again every Refetch by worker 0, each
	// <url> filed for every device (as a POST /v1/sitemaps naming none).
	URLs    []string `yaml:"urls"`
	Refetch Duration `yaml:"refetch"` // RefetchDefault between two reads of each of URLs
}

// Supervisor configures restarts and shutdown.
type Supervisor struct {
	RestartIntensity int      `yaml:"restart_intensity"` // RestartIntensityDefault restarts …
	RestartPeriod    Duration `yaml:"restart_period"`    // … within RestartPeriodDefault, then exit non-zero
	BackoffMin       Duration `yaml:"backoff_min"`       // BackoffMinDefault
	BackoffMax       Duration `yaml:"backoff_max"`       // BackoffMaxDefault
	ShutdownTimeout  Duration `yaml:"shutdown_timeout"`  // ShutdownTimeoutDefault
	ReadyTimeout     Duration `yaml:"ready_timeout"`     // ReadyTimeoutDefault: READY=1 even if the first sweep has not finished
	WatchdogStall    Duration `yaml:"watchdog_stall"`    // WatchdogStallDefault without a heartbeat stops WATCHDOG=1
}

// HTTP configures the public listener (listen): the names a request's Host may carry, and how
// long and how many connections it keeps, so that a slow or idle client is cut at a bound.
type HTTP struct {
	Hosts    []string `yaml:"hosts"`     // none: names Host may carry besides listen's host and localhost (DNS rebinding guard)
	MaxConns int      `yaml:"max_conns"` // MaxConnsDefault connections at once; more wait to be accepted
	// MaxUnauthenticated is how many connections one peer address may hold before a request on
	// them passes the token check (MaxUnauthenticatedDefault, at most MaxConns); one more
	// from that peer is closed as it is accepted (package internal/connguard).
	MaxUnauthenticated int      `yaml:"max_unauthenticated"`
	ReadHeaderTimeout  Duration `yaml:"read_header_timeout"` // ReadHeaderTimeoutDefault to send a request's headers
	ReadTimeout        Duration `yaml:"read_timeout"`        // ReadTimeoutDefault to send a whole request
	WriteTimeout       Duration `yaml:"write_timeout"`       // WriteTimeoutDefault to answer, from the end of the request's headers
	BulkTimeout        Duration `yaml:"bulk_timeout"`        // BulkTimeoutDefault: both bounds for POST /v1/targets, /v1/sitemaps, /v1/results, /v1/prioritize
	IdleTimeout        Duration `yaml:"idle_timeout"`        // IdleTimeoutDefault: how long a keep-alive connection may wait for its next request
}

// defaultedKey is a key EnsureDefaults fills when its field is zero. EnsureDefaults cannot tell
// an absent key from one the file sets to zero, so Parse looks at the file: a key present with
// its zero value is refused with its line (keepZero false), or kept as written where zero is a
// real setting (keepZero true). Either way the file's value is what runs, never a silent default.
type defaultedKey struct {
	path     string
	field    any // *string, *int, *int64, *float64, *Duration, *ByteSize or *[]Duration
	keepZero bool
}

func (c *Config) defaulted() []defaultedKey {
	q, r, s := &c.Queue, &c.Render, &c.Supervisor
	return []defaultedKey{
		{"data_dir", &c.DataDir, false},
		{"listen", &c.Listen, false},
		{"workers", &c.Workers, false},
		{"log.level", &c.Log.Level, false},
		{"log.format", &c.Log.Format, false},
		{"store.gc_interval", &c.Store.GCInterval, false},
		{"store.read_cache", &c.Store.ReadCache, true}, // 0: no read cache
		{"queue.lease_ttl", &q.LeaseTTL, false},
		{"queue.max_leases", &q.MaxLeases, false},
		{"queue.max_remote_leases", &q.MaxRemoteLeases, false},
		{"queue.release_grace", &q.ReleaseGrace, false},
		{"queue.claim_floor.guard", &q.ClaimFloor.Guard, false},
		{"queue.claim_floor.unpin_after", &q.ClaimFloor.UnpinAfter, false},
		{"queue.ready.capacity", &q.Ready.Capacity, false},
		{"queue.ready.key_capacity", &q.Ready.KeyCapacity, false},
		{"queue.ready.sweep_interval", &q.Ready.SweepInterval, false},
		{"queue.ready.sweep_cap", &q.Ready.SweepCap, false},
		{"queue.ready.submitted_boost", &q.Ready.SubmittedBoost, false},
		{"queue.lanes.urgent_max_share", &q.Lanes.UrgentMaxShare, true}, // 0: urgent rows get no reserved share
		{"render.renderer", &r.Renderer, false},
		{"render.concurrency", &r.Concurrency, true}, // 0: derived (Config.RenderConcurrency)
		{"render.timeout", &r.Timeout, false},
		{"render.default_interval", &r.DefaultInterval, false},
		{"render.user_agent", &r.UserAgent, false},
		{"render.user_agent_suffix", &r.UserAgentSuffix, false},
		{"render.max_body", &r.MaxBody, false},
		{"render.max_redirects", &r.MaxRedirects, true}, // 0: follow no redirect
		{"render.chrome.path", &r.Chrome.Path, false},
		{"render.chrome.idle", &r.Chrome.Idle, false},
		{"render.chrome.settle", &r.Chrome.Settle, false},
		{"render.chrome.long_request", &r.Chrome.LongRequest, false},
		{"render.chrome.data_wait", &r.Chrome.DataWait, false},
		{"render.chrome.cache_max_age", &r.Chrome.CacheMaxAge, true}, // 0: the cache is never cleared for its age
		{"render.chrome.nice", &r.Chrome.Nice, true},                 // 0: the browser runs at the worker's priority
		{"render.chrome.recycle_after", &r.Chrome.RecycleAfter, false},
		{"render.chrome.max_rss", &r.Chrome.MaxRSS, false},
		{"render.chrome.user", &r.Chrome.User, false},
		{"render.sim.seed", &r.Sim.Seed, true}, // 0 is a seed like any other
		{"render.failure_retry.fast_delay", &r.FailureRetry.FastDelay, false},
		{"render.failure_retry.factor", &r.FailureRetry.Factor, false},
		{"render.failure_retry.max_backoff", &r.FailureRetry.MaxBackoff, false},
		{"render.failure_retry.non_sitemap_penalty", &r.FailureRetry.NonSitemapPenalty, false},
		{"render.suppression.noindex.strikes", &r.Suppression.Noindex.Strikes, false},
		{"render.suppression.noindex.recheck", &r.Suppression.Noindex.Recheck, false},
		{"render.suppression.gone.strikes", &r.Suppression.Gone.Strikes, false},
		{"render.suppression.gone.recheck", &r.Suppression.Gone.Recheck, false},
		{"render.demand.ladder", &r.Demand.Ladder, false},
		{"render.hosts.max_concurrency", &r.Hosts.MaxConcurrency, false},
		{"render.hosts.max_pause", &r.Hosts.MaxPause, false},
		{"render.hosts.halve_after", &r.Hosts.HalveAfter, false},
		{"render.hosts.grow_after", &r.Hosts.GrowAfter, false},
		{"page.swr_ttl", &c.Page.SWRTTL, false},
		{"page.max_wait", &c.Page.MaxWait, false},
		{"page.max_waiters", &c.Page.MaxWaiters, false},
		{"page.max_site_waiters", &c.Page.MaxSiteWaiters, false},
		{"sitemap.min_ttl", &c.Sitemap.MinTTL, false},
		{"sitemap.max_depth", &c.Sitemap.MaxDepth, true}, // 0: follow no index file
		{"sitemap.max_decompressed", &c.Sitemap.MaxDecompressed, false},
		{"sitemap.refetch", &c.Sitemap.Refetch, false},
		{"supervisor.restart_intensity", &s.RestartIntensity, false},
		{"supervisor.restart_period", &s.RestartPeriod, false},
		{"supervisor.backoff_min", &s.BackoffMin, false},
		{"supervisor.backoff_max", &s.BackoffMax, false},
		{"supervisor.shutdown_timeout", &s.ShutdownTimeout, false},
		{"supervisor.ready_timeout", &s.ReadyTimeout, false},
		{"supervisor.watchdog_stall", &s.WatchdogStall, false},
		{"http.max_conns", &c.HTTP.MaxConns, false},
		{"http.max_unauthenticated", &c.HTTP.MaxUnauthenticated, false},
		{"http.read_header_timeout", &c.HTTP.ReadHeaderTimeout, false},
		{"http.read_timeout", &c.HTTP.ReadTimeout, false},
		{"http.write_timeout", &c.HTTP.WriteTimeout, false},
		{"http.bulk_timeout", &c.HTTP.BulkTimeout, false},
		{"cluster.lease_ttl", &c.Cluster.LeaseTTL, false},
		{"http.idle_timeout", &c.HTTP.IdleTimeout, false},
		{"serve.wait", &c.Serve.Wait, false},
		{"serve.miss_rate", &c.Serve.MissRate, false},
		{"serve.miss_burst", &c.Serve.MissBurst, false},
		{"serve.demand_bytes", &c.Serve.DemandBytes, false},
		{"serve.verify.timeout", &c.Serve.Verify.Timeout, false},
		{"serve.verify.concurrency", &c.Serve.Verify.Concurrency, false},
		{"serve.verify.cache_entries", &c.Serve.Verify.CacheEntries, false},
		{"serve.verify.cache_ttl", &c.Serve.Verify.CacheTTL, false},
	}
}

// fieldValue is the value behind a defaultedKey's field, and whether it is the zero value.
func fieldValue(field any) (v any, zero bool) {
	switch f := field.(type) {
	case *string:
		return *f, *f == ""
	case *int:
		return *f, *f == 0
	case *int64:
		return *f, *f == 0
	case *float64:
		return *f, *f == 0
	case *Duration:
		return *f, *f == 0
	case *ByteSize:
		return *f, *f == 0
	case *[]Duration:
		return *f, len(*f) == 0
	}
	panic(fmt.Sprintf("config: defaulted field of type %T", field))
}

// zeroField sets a defaultedKey's field back to zero. It handles every type fieldValue does;
// another is a programming error (TestEveryKeepZeroKeyKeepsItsZero runs it over every key).
func zeroField(field any) {
	switch f := field.(type) {
	case *string:
		*f = ""
	case *int:
		*f = 0
	case *int64:
		*f = 0
	case *float64:
		*f = 0
	case *Duration:
		*f = 0
	case *ByteSize:
		*f = 0
	case *[]Duration:
		*f = nil
	default:
		panic(fmt.Sprintf("config: defaulted field of type %T", field))
	}
}

// applyDefaults is EnsureDefaults for a file: a key the file sets to a zero that is not a
// setting is refused with its line, a zero that is one is kept, and only absent keys are
// defaulted.
func (c *Config) applyDefaults(file *ast.File) error {
	var keep []any
	for _, k := range c.defaulted() {
		if _, zero := fieldValue(k.field); !zero {
			continue
		}
		line := keyLine(file, k.path)
		if line == 0 {
			continue // absent: defaulted below
		}
		if k.keepZero {
			keep = append(keep, k.field)
			continue
		}
		def := ""
		for _, d := range Default().defaulted() {
			if d.path == k.path {
				v, _ := fieldValue(d.field)
				def = fmt.Sprint(v)
			}
		}
		return &FieldError{Path: k.path, Line: line, Msg: fmt.Sprintf("must not be zero or empty (remove the key for the default, %s)", def)}
	}
	c.EnsureDefaults()
	for _, f := range keep {
		zeroField(f)
	}
	return nil
}

// keyLine is the line of the key at a dotted path if the file sets it, else 0 (no parent
// fallback, unlike lineOf).
func keyLine(file *ast.File, path string) int {
	if file == nil {
		return 0
	}
	yp, err := yaml.PathString("$." + path)
	if err != nil {
		return 0
	}
	node, err := yp.FilterFile(file)
	if err != nil || node == nil {
		return 0
	}
	return node.GetToken().Position.Line
}

// ReadyEnabled reports queue.ready.enabled.
func (c *Config) ReadyEnabled() bool { return c.Queue.Ready.Enabled == nil || *c.Queue.Ready.Enabled }

// FieldError is a validation failure of one field, located in the source when there is one.
type FieldError struct {
	Path string // YAML path, e.g. queue.lease_ttl
	Line int    // 1-based line in the file; 0 when unknown (the field was defaulted)
	Msg  string
}

func (e *FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("config: line %d: %s: %s", e.Line, e.Path, e.Msg)
	}
	return fmt.Sprintf("config: %s: %s", e.Path, e.Msg)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// FieldErrors is every failure Validate found, in the order it checks them. It unwraps to each
// *FieldError, so errors.As finds the first and errors.Is(err, ErrInvalid) holds. Its message is
// one line, for a log event or a one-line error on stderr.
type FieldErrors []*FieldError

func (es FieldErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = strings.TrimPrefix(e.Error(), "config: ")
	}
	return "config: " + strings.Join(msgs, "; ")
}

// Unwrap returns each *FieldError.
func (es FieldErrors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

// ChromeResourceTypes are the resource types render.chrome.block_types may name: the DevTools
// protocol's, lowercase. A document cannot be blocked: it is the page.
var ChromeResourceTypes = []string{"stylesheet", "image", "media", "font", "script", "texttrack", "xhr", "fetch",
	"prefetch", "eventsource", "websocket", "manifest", "signedexchange", "ping", "cspviolationreport", "preflight", "other"}

// LoopbackAddr reports whether the listen address addr is on loopback only.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// validHostPort reports whether s is a host as a normalised URL spells it: a lower-case name or
// IPv4 address, or a bracketed IPv6 address, optionally followed by :port (1..65535).
func validHostPort(s string) bool {
	if s == "" || s != strings.ToLower(s) {
		return false
	}
	host, port, hasPort := s, "", false
	if rest, ok := strings.CutPrefix(s, "["); ok {
		addr, after, ok := strings.Cut(rest, "]")
		if a, err := netip.ParseAddr(addr); !ok || err != nil || !a.Is6() {
			return false
		}
		host = ""
		if after != "" {
			port, hasPort = strings.CutPrefix(after, ":")
			if !hasPort {
				return false
			}
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, port, hasPort = s[:i], s[i+1:], true
	}
	if host != "" && (!validDomain(host) || strings.ContainsAny(host, ":") || strings.HasSuffix(host, ".")) {
		return false
	}
	if hasPort {
		n, err := strconv.Atoi(port)
		return err == nil && n >= 1 && n <= 65535 && port[0] != '0' && port[0] != '+'
	}
	return true
}

// CheckReload refuses a reload that changes a key read only when the pool starts: the segment's
// geometry (workers, shm.path, queue.max_leases, queue.ready.capacity and key_capacity), the
// listener, the store's directory and options, the render workers' loops, and what a process
// reads once when it starts (the supervisor's restart intensity and first readiness bound,
// worker 0's demand flush period). Every other key applies live: a reload that accepts a key
// must apply it (docs/CONFIGURATION.md lists which are which). The running configuration stays
// in force whole; data is the new file, for the line of the key named.
func CheckReload(running, next *Config, data []byte) error {
	for _, k := range []struct {
		path      string
		was, want any
	}{
		{"workers", running.Workers, next.Workers},
		{"listen", running.Listen, next.Listen},
		{"serve.listen", running.Serve.Listen, next.Serve.Listen},
		{"serve.demand_bytes", running.Serve.DemandBytes, next.Serve.DemandBytes},
		{"serve.verify.timeout", running.Serve.Verify.Timeout, next.Serve.Verify.Timeout},
		{"serve.verify.concurrency", running.Serve.Verify.Concurrency, next.Serve.Verify.Concurrency},
		{"serve.verify.cache_entries", running.Serve.Verify.CacheEntries, next.Serve.Verify.CacheEntries},
		{"serve.verify.cache_ttl", running.Serve.Verify.CacheTTL, next.Serve.Verify.CacheTTL},
		{"data_dir", running.DataDir, next.DataDir},
		{"shm.path", running.SHM.Path, next.SHM.Path},
		{"queue.max_leases", running.Queue.MaxLeases, next.Queue.MaxLeases},
		{"queue.ready.capacity", running.Queue.Ready.Capacity, next.Queue.Ready.Capacity},
		{"queue.ready.key_capacity", running.Queue.Ready.KeyCapacity, next.Queue.Ready.KeyCapacity},
		{"store.backend", running.Store.Backend, next.Store.Backend},
		{"store.postgres.dsn", running.Store.Postgres.DSN, next.Store.Postgres.DSN},
		{"store.postgres.shards", running.Store.Postgres.Shards, next.Store.Postgres.Shards},
		{"store.sync_writes", running.Store.SyncWrites, next.Store.SyncWrites},
		{"store.gc_interval", running.Store.GCInterval, next.Store.GCInterval},
		{"store.read_cache", running.Store.ReadCache, next.Store.ReadCache},
		{"node.id", running.Node.ID, next.Node.ID},
		{"cluster.lease_ttl", running.Cluster.LeaseTTL, next.Cluster.LeaseTTL},
		{"render.concurrency", running.Render.Concurrency, next.Render.Concurrency},
		{"http.max_conns", running.HTTP.MaxConns, next.HTTP.MaxConns},
		{"http.max_unauthenticated", running.HTTP.MaxUnauthenticated, next.HTTP.MaxUnauthenticated},
		{"http.read_header_timeout", running.HTTP.ReadHeaderTimeout, next.HTTP.ReadHeaderTimeout},
		{"http.read_timeout", running.HTTP.ReadTimeout, next.HTTP.ReadTimeout},
		{"http.write_timeout", running.HTTP.WriteTimeout, next.HTTP.WriteTimeout},
		{"http.idle_timeout", running.HTTP.IdleTimeout, next.HTTP.IdleTimeout},
		{"supervisor.restart_intensity", running.Supervisor.RestartIntensity, next.Supervisor.RestartIntensity},
		{"supervisor.restart_period", running.Supervisor.RestartPeriod, next.Supervisor.RestartPeriod},
		{"supervisor.ready_timeout", running.Supervisor.ReadyTimeout, next.Supervisor.ReadyTimeout},
		{"freshness.demand_flush", running.Freshness.DemandFlush, next.Freshness.DemandFlush},
	} {
		if k.was != k.want {
			return &FieldError{Path: k.path, Line: lineOf(data, k.path),
				Msg: fmt.Sprintf("changes only on restart (running %v, file %v); reload refused, the running configuration stays", k.was, k.want)}
		}
	}
	// An unset render.concurrency is derived from the renderer (RenderConcurrency): a renderer
	// that derives another figure would need other render loops, which only a restart starts.
	if running.Render.Concurrency == 0 && next.Render.Concurrency == 0 &&
		(running.Render.Renderer == "chrome") != (next.Render.Renderer == "chrome") {
		return &FieldError{Path: "render.renderer", Line: lineOf(data, "render.renderer"),
			Msg: fmt.Sprintf("changes only on restart while render.concurrency is unset (running %s, file %s: the derived render.concurrency differs); reload refused, the running configuration stays", running.Render.Renderer, next.Render.Renderer)}
	}
	return nil
}

// validDomain accepts a host name or IP address as render.domains means it: no scheme, port,
// path, wildcard or blank. Internationalized names are allowed as written; the renderer compares
// them in their ASCII (punycode) form.
func validDomain(d string) bool {
	if _, err := netip.ParseAddr(d); err == nil {
		return true // an IP address, v6 included, matches only itself
	}
	d = strings.TrimSuffix(d, ".")
	if d == "" || strings.HasPrefix(d, ".") || strings.Contains(d, "..") {
		return false
	}
	return !strings.ContainsAny(d, "/:*?#@[] \t\r\n")
}

// validHeaderValue reports whether s can be sent as a header value: non-empty, one line.
func validHeaderValue(s string) bool {
	return strings.TrimSpace(s) != "" && !strings.ContainsAny(s, "\r\n\x00")
}

// Load reads, decodes strictly, defaults and validates the file at path. Every error names the
// file and, where the source has one, the line.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if tok := os.Getenv("FRESHQ_TOKEN"); tok != "" {
		c.Token = tok // a secret is better kept out of a file that gets copied around
		if slices.Contains(c.Serve.Tokens, tok) {
			return nil, fmt.Errorf("%s: serve.tokens: must not hold the admin token (FRESHQ_TOKEN): the crawler listener's tokens are read-only: %w", path, ErrInvalid)
		}
	}
	if dsn := os.Getenv(PostgresDSNEnv); dsn != "" {
		c.Store.Postgres.DSN = dsn // likewise: a DSN may hold a password
	}
	return c, nil
}

// Parse is Load on bytes.
func Parse(data []byte) (*Config, error) { return ParseContext(context.Background(), data) }

// ParseContext is Parse that gives up once ctx is done: for a file that arrives with a request.
// What parsing a file costs is bounded by its size, wherever it comes from: before any parse,
// a file whose collections nest deeper than MaxNestingDepth is refused with its line
// (yamlfile.BoundDepth, a scan of the bytes); the file is then parsed once, and before anything decodes
// the tree, one whose aliases and merge keys stand for more than MaxAliasNodes nodes is refused
// with the line of the alias (yamlfile.BoundAliases). The one tree is decoded, defaulted and searched
// for the lines of errors; ctx is checked between each step and within the alias walk.
func ParseContext(ctx context.Context, data []byte) (*Config, error) {
	if err := yamlfile.BoundDepth(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, strings.TrimSpace(yaml.FormatError(err, false, false)))
	}
	if err := yamlfile.BoundAliases(ctx, file); err != nil {
		var r *yamlfile.Refusal
		if errors.As(err, &r) {
			return nil, &FieldError{Path: r.Path, Line: r.Line, Msg: r.Msg}
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := resolveAliases(file); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c := &Config{}
	if err := decodeStrict(ctx, data, file, c); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := c.applyDefaults(file); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		var errs FieldErrors
		if errors.As(err, &errs) {
			for _, fe := range errs {
				fe.Line = yamlfile.Line(file, fe.Path)
			}
		}
		return nil, err
	}
	return c, nil
}

// decodeStrict decodes data into c, unknown keys refused. The YAML decoder panics on some
// malformed documents (a bare tag as a sequence's value, `routes: ! `); a configuration
// arrives over HTTP too (POST /v1/plan), so a panic is turned into the error it should have
// been, with its line when the parser can name it.
//
// It decodes file, data's tree, without parsing data again; an empty file decodes to nothing.
func decodeStrict(ctx context.Context, data []byte, file *ast.File, c *Config) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: line %d: malformed YAML the decoder cannot read (%v)", ErrInvalid, firstTagLine(data), r)
		}
	}()
	if len(file.Docs) == 0 || file.Docs[0].Body == nil {
		return nil
	}
	if err := yaml.NewDecoder(bytes.NewReader(nil), yaml.Strict()).DecodeFromNodeContext(ctx, file.Docs[0].Body, c); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.TrimSpace(yaml.FormatError(err, false, false)))
	}
	return nil
}

// firstTagLine is the line of the first value that is a bare YAML tag ("!"), 1-based, or 0.
func firstTagLine(data []byte) int {
	for i, l := range strings.Split(string(data), "\n") {
		if _, v, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(strings.TrimSpace(v), "!") {
			return i + 1
		}
		if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "-")), "!") {
			return i + 1
		}
	}
	return 0
}

// LineOf is the line of the key at a dotted path in a configuration file, or of its nearest
// parent the file sets, or 0: for errors about a value that a caller checks outside Validate.
func LineOf(data []byte, path string) int { return lineOf(data, path) }

// MaxNestingDepth bounds how deeply a configuration file's collections nest (yamlfile says why).
const MaxNestingDepth = yamlfile.MaxNestingDepth

// MaxAliasNodes bounds the YAML nodes a file's aliases and merge keys stand for (yamlfile says
// why).
const MaxAliasNodes = yamlfile.MaxAliasNodes

// lineOf is yamlfile.Line on bytes: 0 for a file too deep to parse or not YAML.
func lineOf(data []byte, path string) int {
	if yamlfile.BoundDepth(data) != nil {
		return 0
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return 0
	}
	return yamlfile.Line(file, path)
}

// Duration is a time.Duration that also accepts a "d" (24 h) unit, as in 7d or 1d12h.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Ms returns d in milliseconds.
func (d Duration) Ms() int64 { return time.Duration(d).Milliseconds() }

func (d Duration) String() string { return time.Duration(d).String() }

// ParseDuration parses Go duration syntax with an added "d" unit for days (wire.ParseDuration,
// the one parser of the durations clients send and the file holds).
func ParseDuration(s string) (Duration, error) {
	d, err := wire.ParseDuration(s)
	return Duration(d), err
}

// UnmarshalYAML accepts "90s", "1h30m", "7d", "1d12h". It takes the AST node rather than the
// bytes so that its error can name the line.
func (d *Duration) UnmarshalYAML(node ast.Node) error {
	v, err := ParseDuration(scalarText(node))
	if err != nil {
		return atLine(node, err)
	}
	*d = v
	return nil
}

// scalarText is a scalar node's text without quotes.
func scalarText(node ast.Node) string {
	return strings.Trim(strings.TrimSpace(node.String()), `"'`)
}

// atLine prefixes err with the node's position, in the decoder's own [line:column] form.
func atLine(node ast.Node, err error) error {
	pos := node.GetToken().Position
	return fmt.Errorf("[%d:%d] %w", pos.Line, pos.Column, err)
}

// MarshalYAML writes the Go duration syntax.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// ByteSize is a size in bytes that accepts KiB, MiB, GiB suffixes (and plain numbers).
type ByteSize int64

// UnmarshalYAML accepts 1048576, "512KiB", "10MiB", "1GiB".
func (b *ByteSize) UnmarshalYAML(node ast.Node) error {
	s := scalarText(node)
	text := s
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return atLine(node, fmt.Errorf("invalid size %q (use bytes or KiB, MiB, GiB)", text))
	}
	*b = ByteSize(n * mult)
	return nil
}

// keyAliases are keys still accepted under an earlier name: the earlier dotted path, and the
// key's name now. queue.ready.sitemap_boost became submitted_boost because the boost applies to
// every page the site owner submitted, through the API as well as in a sitemap.
var keyAliases = []struct{ section, old, now string }{
	{"queue.ready", "sitemap_boost", "submitted_boost"},
}

// resolveAliases renames in file's tree every key set under an earlier name to its name now,
// keeping its place, so that every later error keeps its line number. Setting both names is
// an error naming the earlier one.
func resolveAliases(file *ast.File) error {
	for _, a := range keyAliases {
		old, now := sectionKey(file, a.section, a.old), sectionKey(file, a.section, a.now)
		if old == nil {
			continue
		}
		if now != nil {
			return &FieldError{Path: a.section + "." + a.old, Line: old.GetToken().Position.Line,
				Msg: fmt.Sprintf("is the earlier name of %s.%s; set only one", a.section, a.now)}
		}
		if s, ok := old.(*ast.StringNode); ok {
			s.Value = a.now
		}
		old.GetToken().Value = a.now
	}
	return nil
}

// sectionKey is the key name in the mapping at the dotted path section, or nil.
func sectionKey(file *ast.File, section, name string) ast.MapKeyNode {
	yp, err := yaml.PathString("$." + section)
	if err != nil {
		return nil
	}
	node, err := yp.FilterFile(file)
	if err != nil || node == nil {
		return nil
	}
	var pairs []*ast.MappingValueNode
	switch n := node.(type) {
	case *ast.MappingNode:
		pairs = n.Values
	case *ast.MappingValueNode:
		pairs = []*ast.MappingValueNode{n}
	}
	for _, p := range pairs {
		if tk := p.Key.GetToken(); tk != nil && tk.Value == name {
			return p.Key
		}
	}
	return nil
}

// NodeID is node.id, or "<hostname>:<listen>" when it is empty: unique per process on a
// network, and stable across restarts of the same configuration on the same host.
func (c *Config) NodeID() string {
	if c.Node.ID != "" {
		return c.Node.ID
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + ":" + c.Listen
}

// KeyRules are the cache-key rules c configures: keys.drop_params and each route's keep_params
// and trailing_slash, the routes in their order. c must be valid (Validate checks every value
// NewRules would refuse).
func (c *Config) KeyRules() (*cachekey.Rules, error) {
	routes := make([]cachekey.RouteRule, len(c.Routes))
	for i, rt := range c.Routes {
		routes[i] = cachekey.RouteRule{Match: rt.Match, Path: rt.Path, KeepParams: rt.KeepParams, TrailingSlash: rt.TrailingSlash}
	}
	return cachekey.NewRules(c.Keys.DropParams, routes)
}
