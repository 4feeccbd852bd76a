package wire

import "time"

// SitemapSample is how many URLs a sitemap run's report lists per outcome.
const SitemapSample = 10

// LeaseStats is the lease table's state in GET /v1/queue: shm.LeaseStats field for field
// (package api converts one into the other, so the compiler keeps them equal).
type LeaseStats struct {
	Capacity         int
	Live             int // unexpired leases of rows at the time of the scan
	HostSlots        int // unexpired host slots: renders in flight, counted by host (render.hosts)
	Graces           int // unexpired release graces
	RefusedHeld      uint64
	RefusedFull      uint64
	RefusedContended uint64
	GracesEvicted    uint64
}

// Explanation answers GET /v1/targets?url=&device=: everything freshq knows and decides about one
// target, computed now with the policy in force.
type Explanation struct {
	Key        string         `json:"key"`
	URL        string         `json:"url"`
	Device     string         `json:"device"`
	Source     string         `json:"source"`
	DueAt      time.Time      `json:"due_at"`
	DueInSec   float64        `json:"due_in_seconds"` // negative: overdue
	Cadence    Cadence        `json:"cadence"`
	Lane       string         `json:"lane"`
	Score      float64        `json:"score"`
	DemandRung int            `json:"demand_rung,omitempty"`
	Lease      *LeaseInfo     `json:"lease,omitempty"`
	Failures   *Failures      `json:"failures,omitempty"`
	Terminal   *Terminal      `json:"terminal,omitempty"`
	LastRender *RenderInfo    `json:"last_render,omitempty"`
	Page       *PageFreshness `json:"page,omitempty"`
	Freshness  *Freshness     `json:"freshness,omitempty"`
	Verdict    *Verdict       `json:"verdict,omitempty"`
}

// Verdict is a target's last render verdict (docs/RENDERING.md, "Render verdicts"): good, or
// suspect with its reasons' names; the run of suspect renders agreeing on one content, when
// there is one; and whether no good page is stored (marked: the page, if any, is a render
// judged suspect stored for want of a good one, or an operator's wait dropped it).
type Verdict struct {
	Result  string        `json:"result"` // good or suspect
	Reasons []string      `json:"reasons"`
	AtMs    int64         `json:"at_ms"`
	Agree   *VerdictAgree `json:"agree,omitempty"`
	Marked  bool          `json:"marked"`
}

// VerdictAgree is the run of suspect renders with one content: how many, since when.
type VerdictAgree struct {
	Count   int   `json:"count"`
	FirstMs int64 `json:"first_ms"`
}

// SuspectList is GET /v1/suspects: the suspect renders worker 0 keeps (of one site, or all),
// newest first, and the bytes they hold against verdict.keep_bytes.
type SuspectList struct {
	Site      string    `json:"site,omitempty"`
	Suspects  []Suspect `json:"suspects"`
	KeptBytes int64     `json:"kept_bytes"`
}

// Suspect is one kept suspect render.
type Suspect struct {
	Key        string   `json:"key"`
	URL        string   `json:"url"`
	Device     string   `json:"device"`
	Reasons    []string `json:"reasons"`
	AtMs       int64    `json:"at_ms"`
	AgreeCount int      `json:"agree_count"`
	Status     int      `json:"status"`
	Bytes      int      `json:"bytes"`
}

// AcceptSuspect is POST /v1/suspects/accept's body: the page whose kept suspect render is
// applied as its page now.
type AcceptSuspect struct {
	URL    string `json:"url"`
	Device string `json:"device,omitempty"`
}

// Freshness explains a page's freshness of content: what was observed of its changes and its
// requests, the estimates, and the parts of the freshness policy's decision (which decides its
// due time only under queue.policy freshness, Policy).
type Freshness struct {
	Policy string `json:"policy"` // queue.policy in force: ready or freshness
	// Observed: renders that found the content changed, and the hours those and the unchanged
	// ones (renders and 304s) covered; the 304s since the last full render.
	Changed        float64 `json:"changed"`
	ChangedHours   float64 `json:"changed_hours"`
	UnchangedHours float64 `json:"unchanged_hours"`
	Conditional    uint32  `json:"conditional_checks"`
	// The estimates: change interval (1/λ̂, under the route's prior), request rate (μ̂: the
	// decayed count, or the route's prior when never requested).
	ChangeIntervalSec float64 `json:"change_interval_seconds"` // 0: no change expected
	ChangesPerHour    float64 `json:"changes_per_hour"`
	RequestsPerHour   float64 `json:"requests_per_hour"`
	RequestsPrior     bool    `json:"requests_prior,omitempty"` // never requested: the route's prior
	// The score's parts, since the last observation: the requests expected served stale, the
	// marginal value of a render now (stale serves it would prevent, freshness.Marginal)
	// against the threshold, and the interval from a render to the next due these give
	// (the crossing within min_interval and the cadence).
	SinceSec       float64 `json:"since_seconds"`
	ExpectedStale  float64 `json:"expected_stale_serves"`
	Marginal       float64 `json:"marginal"`
	Threshold      float64 `json:"threshold"`
	MinIntervalSec float64 `json:"min_interval_seconds"`
	CrossingSec    float64 `json:"crossing_seconds"` // 0: not within the cadence
	IntervalSec    float64 `json:"interval_seconds"`
	// MaxIntervalSec is the ceiling interval_seconds is bounded by: the route's interval, or
	// under the capacity tuning its stretch; for a still page (seen unchanged at every render
	// over at least the route's interval) the still stretch (freshness.StillStretchFactor).
	MaxIntervalSec float64 `json:"max_interval_seconds"`
	Still          bool    `json:"still"`
	// RankIntervalSec is what the sweep divides the row's lateness by once it is due under
	// queue.policy freshness: threshold ÷ the marginal value's growth at interval_seconds, the
	// ceiling for a row filed at it; 0: its cadence.
	RankIntervalSec float64   `json:"rank_interval_seconds"`
	ObservedAt      time.Time `json:"observed_at,omitzero"`
	ETag            string    `json:"etag,omitempty"`
	LastModified    string    `json:"last_modified,omitempty"`
}

// Cadence is a row's cadence and where it came from: rung (the demand ladder), row (carried:
// an API or sitemap interval), route, target (the stored interval) or default.
type Cadence struct {
	Seconds float64 `json:"seconds"`
	Origin  string  `json:"origin"`
	Route   string  `json:"route,omitempty"`
}

// LeaseInfo is a live lease or release grace.
type LeaseInfo struct {
	Holder     uint64    `json:"holder"`
	HolderName string    `json:"holder_name"` // "remote:<name>" or "worker <i> (pid <p>)" (HolderName)
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	Released   bool      `json:"released"` // a release grace: the render finished
}

// Failures is the current failure streak.
type Failures struct {
	Count   uint32    `json:"count"`
	Class   string    `json:"class"`
	FirstAt time.Time `json:"first_at"`
	LastAt  time.Time `json:"last_at"`
}

// Terminal is a sealed state.
type Terminal struct {
	State     string    `json:"state"`
	RecheckAt time.Time `json:"recheck_at"`
}

// RenderInfo summarises the last attempt.
type RenderInfo struct {
	Status     int       `json:"status"`
	At         time.Time `json:"at"`
	DurationMs int64     `json:"duration_ms"`
	Bytes      uint64    `json:"bytes"`
}

// PageFreshness is the stored page's age against its cadence and its swr window.
type PageFreshness struct {
	AgeSec         float64 `json:"age_seconds"`
	AgeOverCadence float64 `json:"age_over_cadence"`
	SWRSec         float64 `json:"swr_seconds"`
	Servable       bool    `json:"servable"` // within cadence + swr window
}

// QueueView answers GET /v1/queue: the floor and what pins it, the ready set, the backlog by lane,
// grants by source and the leases in use, all read from shared memory; on PostgreSQL also the
// shards this node holds, read from the database.
type QueueView struct {
	Floor struct {
		Ms            int64  `json:"ms"`
		PinnedKeyHash uint64 `json:"pinned_key_hash,omitempty"`
		PinnedSinceMs int64  `json:"pinned_since_ms,omitempty"`
		NextDueMs     int64  `json:"next_due_ms,omitempty"`
		AdvancedAtMs  int64  `json:"advanced_at_ms,omitempty"`
	} `json:"floor"`
	Ready struct {
		Enabled       bool    `json:"enabled"`
		Generation    uint64  `json:"generation"`
		Count         uint64  `json:"count"`
		Taken         uint64  `json:"taken"`
		PublishedAtMs int64   `json:"published_at_ms,omitempty"`
		SweepMs       float64 `json:"sweep_ms"`
		SweepRows     uint64  `json:"sweep_rows"`
		Capped        uint64  `json:"sweeps_capped"`
		DroppedKeys   uint64  `json:"dropped_long_keys"`
	} `json:"ready"`
	Backlog    map[string]uint64 `json:"backlog"`
	BelowFloor uint64            `json:"below_floor"`
	Claims     map[string]uint64 `json:"claims"`
	Leases     LeaseStats        `json:"leases"`
	// Cluster is this node's part of the cluster, on PostgreSQL only.
	Cluster *QueueCluster `json:"cluster,omitempty"`
	// Capacity is whether the farm keeps up: demand, capacity and the projection.
	Capacity *Capacity `json:"capacity,omitempty"`
	// Freshness is the share of crawler requests served stale, measured (QueueFreshness); nil
	// when worker 0 does not measure it.
	Freshness *QueueFreshness `json:"freshness,omitempty"`
	// Hosts are the hosts the host table holds, the most held back first (package hosts);
	// HostsTracked counts them, HostEvictions counts the hosts a full table dropped (their
	// state lost: they went back to their defaults early).
	Hosts         []QueueHost `json:"hosts"`
	HostsTracked  int         `json:"hosts_tracked"`
	HostEvictions uint64      `json:"host_evictions"`
}

// QueueHost is one host of the host table: why renders of it are held back, and how many are
// in flight. A host not listed is at its defaults (render.hosts).
type QueueHost struct {
	Host   string `json:"host"` // host[:port], as in the URL
	Paused bool   `json:"paused"`
	// PausedUntil is when the host's pause ends (a past time: it has ended); absent if the host
	// was not paused.
	PausedUntil   *time.Time `json:"paused_until,omitempty"`
	PausedUntilMs int64      `json:"paused_until_ms,omitempty"`
	Limit         int        `json:"limit"`            // renders in flight allowed once not paused: min(the lowered limit, max)
	Max           int        `json:"max"`              // the configured maximum: render.hosts.max_concurrency or its override
	InFlight      int        `json:"in_flight"`        // renders of the host in flight on the node now
	Cause         string     `json:"cause"`            // retry_after | errors | none
	Status        int        `json:"status,omitempty"` // the HTTP status that last changed the state; 0 for a timeout
	Since         time.Time  `json:"since"`            // when the current pause or lowered limit began
	SinceMs       int64      `json:"since_ms"`
}

// HeldBack reports whether the host is paused now or limited below its maximum: the hosts an
// operator is shown (a host back at its maximum may stay in the table for its streaks).
func (h *QueueHost) HeldBack() bool { return h.Paused || h.Limit < h.Max }

// Sitemap run states.
const (
	RunRunning = "running"
	RunDone    = "done"
	RunFailed  = "failed"
)

// EveryDevice is a sitemap run's device when its request named none: each <url> is filed for
// every device the configuration renders.
const EveryDevice = "every"

// SitemapRun is the report of one run, as GET /v1/sitemaps/{id} answers it.
type SitemapRun struct {
	ID         string         `json:"id"`
	Status     string         `json:"status"` // running | done | failed
	Error      string         `json:"error,omitempty"`
	Source     string         `json:"source"` // the URL, or "body"
	Device     string         `json:"device"` // the device named, or EveryDevice
	StartedMs  int64          `json:"started_ms"`
	FinishedMs int64          `json:"finished_ms,omitempty"`
	Files      int            `json:"files"`    // sitemap files read so far
	URLs       int            `json:"urls"`     // <url> entries handled so far
	Added      SitemapTally   `json:"added"`    // targets: a <url> filed for two devices is two
	Updated    SitemapTally   `json:"updated"`  // the target already existed
	Filtered   SitemapTally   `json:"filtered"` // outside render.domains (URLs and child sitemaps)
	Failed     SitemapFailure `json:"failed"`
}

// SitemapTally counts one outcome, with the first few URLs.
type SitemapTally struct {
	Count  int      `json:"count"`
	Sample []string `json:"sample,omitempty"`
}

// SitemapFailure counts failures, with the first few URLs and why.
type SitemapFailure struct {
	Count  int               `json:"count"`
	Sample []SitemapFailItem `json:"sample,omitempty"`
}

// SitemapFailItem is one failed URL or file.
type SitemapFailItem struct {
	URL    string `json:"url"`
	Reason string `json:"reason"`
}

// Add counts one URL, keeping it in the sample while the sample is short of SitemapSample.
func (t *SitemapTally) Add(u string) {
	t.Count++
	if len(t.Sample) < SitemapSample {
		t.Sample = append(t.Sample, u)
	}
}

// Add counts one failure, keeping it (the URL cut at 512 bytes) in the sample while the
// sample is short of SitemapSample.
func (f *SitemapFailure) Add(u, reason string) {
	f.Count++
	if len(u) > 512 {
		u = u[:512] + "…"
	}
	if len(f.Sample) < SitemapSample {
		f.Sample = append(f.Sample, SitemapFailItem{URL: u, Reason: reason})
	}
}

// SitemapRequest is the JSON body of POST /v1/sitemaps.
type SitemapRequest struct {
	URL    string `json:"url"`
	Device string `json:"device,omitempty"` // default: every device the configuration renders
}

// RemoteClaimRequest is the body of POST /v1/claim.
type RemoteClaimRequest struct {
	Limit    int    `json:"limit"`
	Lease    string `json:"lease,omitempty"`    // lease TTL, e.g. "5m"; default queue.lease_ttl
	Renderer string `json:"renderer,omitempty"` // the remote's name; default "remote"
}

// RemoteJob is one granted job for a remote renderer. Send its lease back with the result.
type RemoteJob struct {
	Job
	URL    string `json:"url"`
	Device string `json:"device"`
}

// RemoteClaimResponse answers POST /v1/claim. QueuedBehindLeases with no job means due work is
// waiting behind rows being rendered: claim again soon, it is not "nothing to do".
type RemoteClaimResponse struct {
	Jobs               []RemoteJob `json:"jobs"`
	QueuedBehindLeases bool        `json:"queued_behind_leases,omitempty"`
}

// LeaseRequest is the body of POST /v1/leases/extend and /v1/leases/release: the key and the
// lease as handed out with the job (or as the last extend returned it).
type LeaseRequest struct {
	Key   []byte `json:"key"`
	Lease Lease  `json:"lease"`
	TTL   string `json:"ttl,omitempty"` // extend only: the new TTL from now; default queue.lease_ttl
}

// LeaseResponse answers an extend: the lease to use from now on (its state changed), and when
// it lapses.
type LeaseResponse struct {
	Lease     Lease     `json:"lease"`
	ExpiresAt time.Time `json:"expires_at"`
}

// DiscoverRequest is the body of POST /v1/discover.
type DiscoverRequest struct {
	URL    string `json:"url"`
	Device string `json:"device,omitempty"`
}

// PrioritizeRequest is the body of POST /v1/prioritize.
type PrioritizeRequest struct {
	URL    string `json:"url,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Device string `json:"device,omitempty"`
	Mode   string `json:"mode"`
}

// KeyMove is one stored key the key rules in force would change, and what they change it to.
type KeyMove struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// KeysCheck answers GET /v1/keys/check: of the Scanned stored keys, Changed would get another
// key under the key rules in force (Examples lists the first few), and Unkeyable cannot be
// rekeyed at all (their URL no longer normalises, or its new key would exceed the store's
// limit); keys migrate leaves those where they are.
type KeysCheck struct {
	Scanned   int       `json:"scanned"`
	Changed   int       `json:"changed"`
	Unkeyable int       `json:"unkeyable"`
	Examples  []KeyMove `json:"examples"`
}

// KeysMigrateRequest is the body of POST /v1/keys/migrate: move at most Limit keys (0: the
// server's default).
type KeysMigrateRequest struct {
	Limit int `json:"limit,omitempty"`
}

// KeysMigrate answers POST /v1/keys/migrate. Moved keys went to a new key nobody held;
// Kept ones found their new key taken and were dropped in favour of it; Replaced ones found it
// taken by a record whose page was older, and replaced it. Done is true when no key is left to
// migrate under the rules in force.
type KeysMigrate struct {
	Moved    int  `json:"moved"`
	Kept     int  `json:"kept"`
	Replaced int  `json:"replaced"`
	Done     bool `json:"done"`
}

// QueueFreshness is the share of crawler requests served stale since worker 0 started: of the
// requests served between two observations of their page's content (a render or a 304), those
// served after it had changed (expected: when the content changed over the interval, the part
// after the change). A request is counted once the observation after it is applied.
//
// The Window fields are the same counted over the last 15 minutes (by when they were counted),
// so that a farm's share is seen apart from its first pass and a setting's effect shows within
// the quarter hour.
type QueueFreshness struct {
	Policy         string  `json:"policy"` // queue.policy in force
	ServedRequests float64 `json:"served_requests"`
	StaleRequests  float64 `json:"stale_requests"`
	StaleShare     float64 `json:"stale_share"` // stale ÷ served; 0 with none counted
	// WindowS is the window's length in seconds (900).
	WindowS              float64 `json:"window_s"`
	WindowServedRequests float64 `json:"window_served_requests"`
	WindowStaleRequests  float64 `json:"window_stale_requests"`
	WindowStaleShare     float64 `json:"window_stale_share"` // 0 with none counted
	// Crawlers is what each crawler family got at the crawler listener since worker 0
	// started, by family and verification (a bounded set: families × verdicts), the ones with a
	// request only; absent when worker 0 serves no crawler listener.
	Crawlers []QueueCrawler `json:"crawlers,omitempty"`
}

// QueueCrawler is one crawler family and verification's answers at the crawler listener.
type QueueCrawler struct {
	Family       string  `json:"family"`       // google bing apple yandex baidu duckduckgo openai anthropic perplexity commoncrawl social other
	Verification string  `json:"verification"` // verified unverified unverifiable unchecked pending
	Requests     uint64  `json:"requests"`     // hit + stale + miss + refused
	Hit          uint64  `json:"hit"`          // a stored page within its cadence
	Stale        uint64  `json:"stale"`        // a stored page past its cadence, served marked
	Miss         uint64  `json:"miss"`         // rendered on miss and served
	Refused      uint64  `json:"refused"`      // not stored and not rendered: the claim was not verified (503)
	StaleShare   float64 `json:"stale_share"`  // stale ÷ (hit + stale + miss); 0 with none
}
