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
	// Routes are the routes' settings besides the policy's, compiled once where the settings
	// are assembled, in the order of the policy's routes (policy.KeyRoute.Index); a route
	// past the end (a test's settings without them) has every default.
	Routes []RouteSettings

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

// KeyRoute is a key's route resolved once (Settings.Resolve): what the policy reads of it and
// what the services do, from one match of the key. A service resolves a key once per request,
// result or row and hands the value to every decision of that key.
type KeyRoute struct {
	Policy policy.KeyRoute
	// Route is the route's settings; nil when the key matches no route or these settings
	// carry none for it: then every one has its default.
	Route *RouteSettings
}

// Resolve resolves key's route: the policy's one match (policy.Policy.Resolve) and the
// settings of the route it found.
func (s *Settings) Resolve(key []byte) KeyRoute {
	kr := KeyRoute{Policy: s.Policy.Resolve(key)}
	if i := kr.Policy.Index; i >= 0 && i < len(s.Routes) {
		kr.Route = &s.Routes[i]
	}
	return kr
}

// ServeStale is routes[].serve_stale of the key's route (true without one).
func (kr KeyRoute) ServeStale() bool { return kr.Route == nil || kr.Route.ServeStale }

// Expect is routes[].expect of the key's route: what every good page of it has; nil: nothing.
func (kr KeyRoute) Expect() *verdict.Expect {
	if kr.Route == nil {
		return nil
	}
	return kr.Route.Expect
}
