package intake

import (
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/verdict"
)

// Settings is everything worker 0's services read of the configuration, with the policy it
// was compiled with, so that one read gives a policy and settings that agree: a service loads
// it once per request, result batch or run, and a reload applies to the next one. It is
// narrowed from the configuration where the node is assembled (assemble/settings); no package of
// the services reads the configuration itself.
type Settings struct {
	Policy *policy.Policy

	Devices map[string]bool // the devices a target may name (render.devices, render.user_agents, the built-in ones)
	Domains []string        // render.domains: an empty list allows any host, but renders none on miss

	LeaseTTL        time.Duration // queue.lease_ttl: the longest lease a remote renderer may ask for
	MaxRemoteLeases int           // queue.max_remote_leases: one remote's live leases at most
	ReleaseGrace    time.Duration // queue.release_grace: a revoked lease keeps its key unclaimable this long
	SweepInterval   time.Duration // queue.ready.sweep_interval: a rushed row's revoked lease holds two of them
	Hosts           hosts.Limits  // render.hosts: the host tokens a release or revoke looks among

	Freshness FreshnessSettings
	Routes    map[string]RouteSettings // by route name; a route absent here has every default

	// Verdict is the verdict section's thresholds (verdict.*); the zero value (a test's
	// settings) is DefaultVerdict.
	Verdict verdict.Settings
	// KeepBytes is verdict.keep_bytes: the suspect bodies worker 0 keeps for inspection, in
	// bytes at most (Suspects); 0 is DefaultKeepBytes.
	KeepBytes int64
}

// The verdict defaults: what a node without a verdict section runs with.
var DefaultVerdict = verdict.Settings{CollapseRatio: 0.33, MinText: 200, Agree: 3, AgreeSpan: 30 * time.Minute}

// DefaultKeepBytes is verdict.keep_bytes's default: 32 MiB of suspect bodies.
const DefaultKeepBytes = 32 << 20

// SiteOf is the site of key's host (cachekey.Sites of render.domains): the unit the crawler
// listener's limits are kept by, as politeness's are, so that no spelling of a host, no port
// and no subdomain of a site multiplies them.
func (s *Settings) SiteOf(key []byte) string {
	if s.Hosts.Sites == nil { // settings not narrowed by assemble (a test's)
		return cachekey.NewSites(s.Domains).OfKey(key)
	}
	return s.Hosts.Sites.OfKey(key)
}

// SiteOfHost is the site of host, as SiteOf names a key's.
func (s *Settings) SiteOfHost(host string) string {
	if s.Hosts.Sites == nil {
		return cachekey.NewSites(s.Domains).Of([]byte(host))
	}
	return s.Hosts.Sites.Of([]byte(host))
}

// FreshnessSettings is freshness.* and queue.policy as the services use them.
type FreshnessSettings struct {
	Policy            string        // queue.policy, as explain names it
	On                bool          // queue.policy is freshness: due times follow the freshness score
	Normalize         bool          // freshness.normalize: digests strip what changes on every load
	RequestTau        time.Duration // freshness.request_tau: the request counters' decay
	Requests          float64       // freshness.requests: the request rate of a page never counted
	Threshold         float64       // freshness.threshold
	PriorWeight       float64       // freshness.prior_weight
	StretchFactor     float64       // freshness.stretch_factor: how far past ready's longest a ceiling may be
	MinIntervalDiv    int64         // a route without min_interval renders at most every cadence ÷ this
	ConditionalEvery  int           // freshness.conditional_every
	ConditionalMaxAge time.Duration // freshness.conditional_max_age
}

// RouteSettings is what the services read of one route besides what policy does.
type RouteSettings struct {
	ServeStale     bool          // routes[].serve_stale (default true)
	Strip          []string      // routes[].strip: patterns the digest removes
	Requests       float64       // routes[].requests: 0 = freshness.requests
	MinInterval    time.Duration // routes[].min_interval: 0 = cadence ÷ MinIntervalDiv
	ChangeInterval time.Duration // routes[].change_interval: 0 = the cadence
	// Expect is routes[].expect: what every good page of the route has; nil: nothing.
	Expect *verdict.Expect
}

// Route returns the settings of key's route and whether it has one.
func (s *Settings) Route(key []byte) (RouteSettings, bool) {
	name, _ := s.Policy.RouteOf(key)
	if name == "" {
		return RouteSettings{}, false
	}
	r, ok := s.Routes[name]
	return r, ok
}
