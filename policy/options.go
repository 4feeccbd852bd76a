package policy

import (
	"time"

	"github.com/freshq/freshq/cachekey"
)

// Options is every setting policy decides with, and nothing else: the cadences (the default,
// the routes' intervals and swr windows), the boost and lane shares of the ready set, the
// cache-key rules, and what a render's outcome does to a row (the demand ladder, the retry
// backoff, the seals). It is narrowed from the configuration where a node is assembled
// (assemble.PolicyOptions), so policy imports no configuration and a test of it states every
// value it decides with.
type Options struct {
	DefaultInterval time.Duration // render.default_interval: the cadence when nothing else says
	DefaultSWR      time.Duration // page.swr_ttl: a route without its own swr gets this
	Routes          []Route       // in their order: the first match wins
	SubmittedBoost  float64       // queue.ready.submitted_boost
	Shares          Shares        // queue.lanes
	Keys            *cachekey.Rules
	Ladder          []time.Duration // render.demand.ladder, fastest first; empty: no ladder
	Retry           Retry           // render.failure_retry
	Gone, Noindex   Seal            // render.suppression.gone, .noindex
}

// Match is how a route's pattern is matched against a URL's path.
type Match uint8

const (
	MatchExact    Match = iota // the path equals the pattern
	MatchPrefix                // the path starts with it
	MatchContains              // the path contains it
)

func (m Match) String() string {
	switch m {
	case MatchExact:
		return "exact"
	case MatchPrefix:
		return "prefix"
	case MatchContains:
		return "contains"
	}
	return "unknown"
}

// Route is one route as policy uses it: its name, how it matches, and the cadence and
// stale-while-revalidate window it gives the pages it matches.
type Route struct {
	Name     string
	Match    Match
	Path     string
	Interval time.Duration // the route's cadence and ceiling; 0: none
	SWR      time.Duration // 0: Options.DefaultSWR
}

// Retry is the backoff of a transient failure: FastRetries at FastDelay, then ×Factor per
// further failure up to MaxBackoff; a row that was not submitted waits ×NonSubmittedPenalty.
type Retry struct {
	FastRetries         int
	FastDelay           time.Duration
	Factor              float64
	MaxBackoff          time.Duration
	NonSubmittedPenalty float64
}

// Seal is when a deterministic failure seals its target: after Strikes observations in a row,
// rechecked every Recheck.
type Seal struct {
	Strikes int
	Recheck time.Duration
}
