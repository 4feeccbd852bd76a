package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/store"
)

// Bounds on what counts as a usable cadence and a finite due time.
const (
	MinCadence = time.Minute          // a cadence below this is unusable: resolved instead
	MaxCadence = 365 * 24 * time.Hour // a cadence above this is unusable too
	MaxDueMs   = int64(1) << 53       // a due time at or past this (≈ 285,000 years) is "never"
	// MinRankInterval bounds a rank interval a write filed (RankInterval) from below: the unit
	// due times are kept in. Rank intervals are not cadences: queue.policy freshness files ν ÷ h′
	// at the row's crossing, seconds or less for the pages worth most on a route of minutes, and
	// clamped to MinCadence those rows would rank alike with every row at its ceiling. A cadence
	// stays within MinCadence: that bound is on how often a page is rendered (the API's and the
	// sitemap's intervals, the ladder, the default interval), not on how the due rows are ordered.
	MinRankInterval = time.Millisecond
)

// Policy is the compiled decision set for one configuration. It is immutable and safe for
// concurrent use; a reload builds a new one.
type Policy struct {
	opts              Options
	routes            []route
	defaultIntervalMs int64
	defaultSWRMs      int64
	boost             float64
	shares            Shares
	keys              *cachekey.Rules
	scorer            Scorer // nil: relative lateness (Score)
}

// New compiles o. The options must be valid (the configuration they were narrowed from passed
// its validation), and o.Keys must be set.
func New(o Options) *Policy {
	if o.Keys == nil {
		// Every URL becomes a key through these rules: a policy without them is an assembly bug.
		panic("policy: Options.Keys is nil")
	}
	return &Policy{
		opts:              o,
		keys:              o.Keys,
		routes:            compileRoutes(o.Routes, o.DefaultSWR.Milliseconds()),
		defaultIntervalMs: clampCadence(o.DefaultInterval.Milliseconds()),
		defaultSWRMs:      o.DefaultSWR.Milliseconds(),
		boost:             o.SubmittedBoost,
		shares:            o.Shares,
	}
}

// Options returns the options the policy was compiled from. Its slices are the policy's own:
// read them, never write them.
func (p *Policy) Options() Options { return p.opts }

// Keys returns the cache-key rules of the configuration (keys.drop_params, the routes'
// keep_params and trailing_slash): every URL taken from outside becomes a key through them.
func (p *Policy) Keys() *cachekey.Rules { return p.keys }

// Shares returns the lane shares of the configuration, for building a Selector.
func (p *Policy) Shares() Shares { return p.shares }

// Boost returns queue.ready.submitted_boost.
func (p *Policy) Boost() float64 { return p.boost }

// Row is what a decision needs to know about a schedule row: its key, its due time and the due
// index's projection (whether it was submitted, the cadence the write path decided, 0 = absent,
// the target's stored interval, the lane inputs). It is the store's own due row, not a copy of
// its shape: a field the store adds to a row reaches every decision, and no conversion exists
// that could leave it out.
type Row = store.DueRow

// Origin says where a row's cadence came from.
type Origin uint8

const (
	// OriginRow: carried on the row (ladder rung, sitemap changefreq, API interval), possibly
	// clamped to its route's ceiling.
	OriginRow Origin = iota + 1
	// OriginRoute: resolved from the matching route's interval.
	OriginRoute
	// OriginTarget: resolved from the target's stored interval.
	OriginTarget
	// OriginDefault: resolved from render.default_interval.
	OriginDefault
)

func (o Origin) String() string {
	switch o {
	case OriginRow:
		return "row"
	case OriginRoute:
		return "route"
	case OriginTarget:
		return "target"
	case OriginDefault:
		return "default"
	}
	return "unknown"
}

// Carried reports whether the cadence was carried on the row rather than resolved from
// configuration (freshq_ready_cadence_total{origin="carried"|"resolved"}).
func (o Origin) Carried() bool { return o == OriginRow }

func usable(ms int64) bool {
	return ms >= MinCadence.Milliseconds() && ms <= MaxCadence.Milliseconds()
}

func clampCadence(ms int64) int64 {
	return min(max(ms, MinCadence.Milliseconds()), MaxCadence.Milliseconds())
}

// clampRank bounds what Score divides by: a cadence (already within the usable cadences) or a
// filed rank interval, within [MinRankInterval, MaxCadence], so the score never divides by zero.
func clampRank(ms int64) int64 {
	return min(max(ms, MinRankInterval.Milliseconds()), MaxCadence.Milliseconds())
}

// Cadence returns the row's cadence in ms and where it came from. The carried cadence wins,
// clamped to its route's ceiling. Absent or unusable, it resolves: route > target's stored
// interval > render.default_interval. It is the page's cadence, never the gap a backoff or a
// recheck filed as the due time.
func (p *Policy) Cadence(r *Row) (ms int64, origin Origin) {
	return p.CadenceOf(r, p.Resolve(r.Key))
}

// CadenceOf is Cadence for a row whose key's route kr was resolved already (Resolve).
func (p *Policy) CadenceOf(r *Row, kr KeyRoute) (ms int64, origin Origin) {
	ceiling := kr.IntervalMs
	switch {
	case usable(r.EffectiveIntervalMs):
		ms, origin = r.EffectiveIntervalMs, OriginRow
		if ceiling > 0 {
			ms = min(ms, ceiling)
		}
	case ceiling > 0:
		ms, origin = ceiling, OriginRoute
	case usable(r.StoredIntervalMs):
		ms, origin = r.StoredIntervalMs, OriginTarget
	default:
		ms, origin = p.defaultIntervalMs, OriginDefault
	}
	return clampCadence(ms), origin
}

// RankInterval is what Score divides a due row's lateness by: the rank interval the row's
// write filed (store.Projection.RankIntervalMs: queue.policy freshness files one with each due
// time, freshness.RankInterval), within [MinRankInterval, MaxCadence], else cadenceMs, the
// row's cadence (Cadence), as under ready. Unlike the cadence it is not clamped to the route's
// interval nor to MinCadence: it measures how fast the page's value grows, not how often it is
// rendered, and the rows worth most on a route of a minute grow past ν in seconds.
func (p *Policy) RankInterval(r *Row, cadenceMs int64) int64 {
	if r.RankIntervalMs > 0 {
		return clampRank(r.RankIntervalMs)
	}
	return cadenceMs
}

// Scorer ranks a due row in place of relative lateness: the freshness policy's score (package
// freshness), which needs what the row's projection alone does not carry yet. It must be a
// pure function of its arguments and what it was built with; Score still gives 0 to a row
// without a finite due time or not yet due, and the selector treats NaN and negatives as 0.
type Scorer func(r *Row, cadenceMs, nowMs int64) float64

// WithScorer returns a copy of the policy whose Score is s (nil: relative lateness again).
// The policy itself is unchanged: it is immutable and may be in use.
func (p *Policy) WithScorer(s Scorer) *Policy {
	c := *p
	c.scorer = s
	return &c
}

// Score is the row's relative lateness at nowMs: max(0, now − dueAt) / rankMs, times the
// boost for a submitted row (queue.ready.submitted_boost); or, for a policy built WithScorer,
// that scorer's rank. rankMs comes from RankInterval: the row's cadence (Cadence) unless its
// write filed a rank interval. A row without a finite due time, or not yet due, scores 0.
func (p *Policy) Score(r *Row, rankMs, nowMs int64) float64 {
	if r.DueAtMs <= 0 || r.DueAtMs >= MaxDueMs || nowMs <= r.DueAtMs {
		return 0
	}
	if p.scorer != nil {
		return p.scorer(r, rankMs, nowMs)
	}
	s := float64(nowMs-r.DueAtMs) / float64(clampRank(rankMs))
	if r.Submitted {
		s *= p.boost
	}
	return s
}

// Lane is a row's lane (docs/ARCHITECTURE.md, "lane"), derived from the row and never stored.
type Lane uint8

const (
	LaneUrgent     Lane = iota // an operator rush is pending
	LaneSubmitted              // sitemap or API submitted
	LaneDiscovered             // crawler-discovered
	LaneCold                   // failing or never rendered
	NumLanes
)

func (l Lane) String() string {
	switch l {
	case LaneUrgent:
		return "urgent"
	case LaneSubmitted:
		return "submitted"
	case LaneDiscovered:
		return "discovered"
	case LaneCold:
		return "cold"
	}
	return "unknown"
}

// LaneOf derives a row's lane: urgent if rushed, else cold if failing or never rendered, else
// submitted or discovered by where it came from.
func LaneOf(r *Row) Lane {
	switch {
	case r.Urgent:
		return LaneUrgent
	case r.Failing || r.NeverRendered:
		return LaneCold
	case r.Submitted:
		return LaneSubmitted
	}
	return LaneDiscovered
}

// CadenceBound is the longest cadence the configuration in force gives the row: its route's
// interval when a route matches (Cadence clamps every carried cadence to it); else the target's
// stored interval; else the slowest rung of render.demand.ladder; else render.default_interval.
// A render files at most this cadence (Apply), so a row carrying a longer one was filed under
// an earlier configuration: a reload that shortened an interval, or a restart with one
// shortened. The reload's reschedule (intake.Targets.Reschedule) moves such rows.
func (p *Policy) CadenceBound(r *Row) int64 {
	return p.CadenceBoundOf(r, p.Resolve(r.Key))
}

// CadenceBoundOf is CadenceBound for a row whose key's route kr was resolved already (Resolve).
func (p *Policy) CadenceBoundOf(r *Row, kr KeyRoute) int64 {
	switch {
	case kr.IntervalMs > 0:
		return clampCadence(kr.IntervalMs)
	case usable(r.StoredIntervalMs):
		return r.StoredIntervalMs
	case len(p.opts.Ladder) > 0:
		return clampCadence(slices.Max(p.opts.Ladder).Milliseconds())
	}
	return clampCadence(p.defaultIntervalMs)
}

// CadenceKey is what CadenceBound depends on in the configuration: the routes (their match,
// path and interval, in order), the ladder and render.default_interval. Two policies with the
// same key bound every row alike, so a reload that leaves it unchanged has no row to move.
func (p *Policy) CadenceKey() string {
	var b strings.Builder
	for _, r := range p.opts.Routes {
		fmt.Fprintf(&b, "%d %q %d|", r.Match, r.Path, r.Interval)
	}
	fmt.Fprintf(&b, "%v|%d", p.opts.Ladder, p.opts.DefaultInterval)
	return b.String()
}
