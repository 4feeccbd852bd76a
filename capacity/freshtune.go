package capacity

import (
	"context"
	"math"

	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/store"
)

// Capacity-following freshness (queue.policy freshness). Production files a rendered page due
// when its marginal value reaches a threshold ν, within a floor and a ceiling (package
// freshness, DueAfter). A fixed ν renders what the operator guessed, not what the farm can:
// under scarcity the due rows queue and the sweep ranks them by lateness, as ready does. The
// threshold that spends exactly the capacity is the water-filling's multiplier
// (freshness.Threshold) over the corpus's estimated λ and μ; and a ceiling at the route's
// interval makes every row due at it once capacity is short, so the ceiling follows capacity
// too: what ready itself would stretch the route to (Project's age ÷ cadence), never more.
// Worker 0 computes both at the capacity recount (TuneFreshness), never per render.

// FreshProbe is the factor by which a node that is not saturated raises the capacity it plans
// freshness with at each tuning. The meter measures the renders done, not the renders
// possible: a node asking for fewer renders than it could do would otherwise plan with what it
// asked for, raise ν, ask for still fewer and spiral down. Raised until the due rows outgrow a
// sweep, the plan meets the farm's real capacity and the meter's measure takes over again.
const FreshProbe = 1.25

// FreshPage is one row as the threshold sees it: its route, its estimated change and request
// rates (per hour), its cadence, the interval its ceiling stretches (CeilingBaseMs: its
// route's interval, intake's FreshParts; 0 is its cadence) and its floor, and its own
// observations (History), which the tuning pools per route into the prior of the route's pages.
type FreshPage struct {
	Route         string
	Lambda, Mu    float64
	CadenceMs     int64
	CeilingBaseMs int64
	MinIntervalMs int64
	History       freshness.History
}

// ceilingMs is the page's ceiling under tuning t, as the Applier files it (freshness.Decide):
// its ceiling base (else its cadence) times its route's stretch, or a still page's
// (freshness.Still, Tuning.CeilingStretch), so that the water-filling plans with the renders
// the ceilings really ask for.
func (pg *FreshPage) ceilingMs(t *freshness.Tuning) float64 {
	base := pg.CeilingBaseMs
	if base <= 0 {
		base = pg.CadenceMs
	}
	return float64(base) * t.CeilingStretch(pg.Route, freshness.Still(pg.History, base))
}

// FreshInput is what a tuning reads: the ledger's demand, the meter's capacity, the
// submitted boost, the due rows now (Backlog) and the sweep interval, the capacity the
// previous tuning planned with (0: none), the stretch it filed (PrevStretch, nil: none) and
// when (PrevAtMs), now (NowMs), and every row's page.
type FreshInput struct {
	Demand        Demand
	Measured      Capacity
	Boost         float64
	Backlog       uint64
	SweepMs       int64
	PrevPerSecond float64
	PrevStretch   map[string]float64
	PrevAtMs      int64
	NowMs         int64
	Pages         []FreshPage
	// StretchFactor scales the stretch past 1 (freshness.stretch_factor, FactorStretch): 1 (or
	// 0) keeps every ceiling at ready's projected longest interval.
	StretchFactor float64
}

// FreshTuning is what the Applier files due times with under queue.policy freshness.
type FreshTuning struct {
	// Tuning is the threshold (Nu: a page is due when its marginal value reaches it) and per
	// route the ceiling ÷ its route's interval (Stretch: 1 while capacity suffices, the longest
	// age ÷ cadence ready is projected to leave the route's pages under scarcity, smoothed over
	// tunings: SmoothStretch).
	freshness.Tuning
	// PerSecond is the capacity planned with (renders per second); Saturated whether the due
	// rows outgrew what the node renders in a sweep interval, so that the meter's measure is
	// its capacity rather than its demand.
	PerSecond float64
	Saturated bool
}

// StretchOf is the ceiling's multiple of the route's interval for rows of route when the
// route's age ÷ cadence under ready is projected at ageOverCadence: that, at least 1. A
// route's interval stays the maximum time between two renders whenever ready would keep it,
// and otherwise no row waits longer than under ready.
func StretchOf(ageOverCadence float64) float64 {
	if !(ageOverCadence > 1) { // NaN too
		return 1
	}
	return min(ageOverCadence, MaxStretch)
}

// FactorStretch is stretch s with its part past 1 scaled by factor (freshness.stretch_factor):
// 1 + (s − 1)·factor, within [1, MaxStretch·max(factor, 1)]. While capacity suffices (s = 1)
// the ceiling stays the route's interval whatever the factor. Under scarcity, ready's longest
// interval is close to its mean when a route's pages are alike (ready renders them in turn):
// ceilings there ask for the whole capacity and leave the threshold nothing to give the pages
// that change, so freshness renders as ready does. A factor above 1 is the operator's trade:
// pages that do not change may wait longer than under ready, so that those that do are
// rendered more often. A factor below 1 (0: unset) is 1.
func FactorStretch(s, factor float64) float64 {
	factor = max(factor, 1)
	if !(s > 1) {
		return 1
	}
	return min(1+(s-1)*factor, MaxStretch*factor)
}

// StretchTauMs is the time constant with which the ceilings follow the projected stretch
// (SmoothStretch). The projection reads the capacity of the meter's last window (or, on a node
// not saturated, the previous plan raised by FreshProbe), which near full capacity moves from
// one tuning to the next around the demand; taken raw, each tuning files its rows' ceilings
// longer or shorter than the last's, and the rows filed short fall due together. 80 hours is a
// few of the longest intervals the ceilings stretch (24 to 48 hours): long enough to follow
// the capacity rather than its windows, short enough to follow a lasting change within a few
// days. On the simulator's standard mix at full capacity, against the oracle: +4.5 % stale
// requests raw, +1.5 % at 40 hours, +0.3 % at 80, +0.7 % at 160 (with the ceilings at the
// routes' intervals and retries ranked ahead; the smoothing alone took +19.2 % to +11.7 %).
const StretchTauMs = 80 * 3_600_000

// SmoothStretch is the stretch a tuning files: prev (the last tuning's, elapsedMs ago) moved
// towards raw (this projection's) by the share 1 − e^{−elapsed/StretchTauMs}, per route. A
// route prev lacks takes raw as it is (as does every route of the first tuning); a route raw
// lacks (its demand gone) is dropped. Every value stays within [1, MaxStretch] when raw's and
// prev's are. The result is a new map; neither argument is changed.
func SmoothStretch(prev, raw map[string]float64, elapsedMs int64) map[string]float64 {
	keep := math.Exp(-float64(max(elapsedMs, 0)) / StretchTauMs)
	out := make(map[string]float64, len(raw))
	for route, r := range raw {
		p, ok := prev[route]
		if !ok {
			out[route] = r
			continue
		}
		out[route] = r + (p-r)*keep
	}
	return out
}

// MaxStretch bounds the stretch: a ceiling is at most this many intervals. A projection
// beyond it reads a meter that measured next to nothing (a farm stopped, a node just
// started): ready would then render nothing at all, and a due time that far out would outlast
// the farm's return.
const MaxStretch = 16

// TuneMinRenders is how many renders the meter must have counted before a tuning plans with
// them when its window is not yet whole: the capacity is then known to within about 7 %
// (1/√200) and the renders have observed that many pages once, which is what the estimates
// steer by. A node rendering a few pages a second tunes within a minute or two of its start
// instead of after a whole window (15 minutes) and the next recount (10 more): the first
// twenty minutes of a new install, a restart or a new site are no longer run at the
// configuration's starting threshold, under which a new site's pages barely steer.
const TuneMinRenders = 200

// measuredEnough reports whether capacity c is measured well enough to tune with: a whole
// window (MeterWindow, to its resolution) with a render in it, or TuneMinRenders renders.
func measuredEnough(c Capacity) bool {
	return c.Renders >= TuneMinRenders || c.Renders > 0 && c.WindowMs >= MeterWindow-meterBucketMs
}

// TuneFreshness computes the threshold and the ceilings for the capacity in, and each route's
// pooled change rate from its pages' histories. ok is false when the meter has measured neither
// a whole window with a render in it nor TuneMinRenders renders (measuredEnough): the caller
// keeps what it had, the configuration's freshness.threshold at the start.
func TuneFreshness(in FreshInput) (t FreshTuning, ok bool) {
	c := in.Measured
	if !measuredEnough(c) {
		return FreshTuning{}, false
	}
	perSweep := c.PerSecond * float64(max(in.SweepMs, 0)) / 1000
	t.Saturated = float64(in.Backlog) >= max(perSweep, 1)
	if !t.Saturated && in.PrevPerSecond > 0 {
		c.PerSecond = max(c.PerSecond, in.PrevPerSecond*FreshProbe)
	}
	t.PerSecond = c.PerSecond
	p := Project(in.Demand, c, in.Boost, in.Backlog)
	raw := make(map[string]float64, len(p.LongestByRoute))
	for route, age := range p.LongestByRoute {
		raw[route] = FactorStretch(StretchOf(age), in.StretchFactor)
	}
	t.Stretch = SmoothStretch(in.PrevStretch, raw, in.NowMs-in.PrevAtMs)
	pooled := map[string]*freshness.History{}
	pages := make([]freshness.Page, len(in.Pages))
	for i, pg := range in.Pages {
		h := pooled[pg.Route]
		if h == nil {
			h = &freshness.History{}
			pooled[pg.Route] = h
		}
		h.Pool(pg.History)
		ceil := pg.ceilingMs(&t.Tuning)
		pages[i] = freshness.Page{Lambda: pg.Lambda, Mu: pg.Mu}
		if ceil > 0 {
			pages[i].MinPerHour = 3_600_000 / ceil
		}
		if pg.MinIntervalMs > 0 {
			pages[i].MaxPerHour = 3_600_000 / float64(pg.MinIntervalMs)
		}
	}
	t.RouteRate = make(map[string]float64, len(pooled))
	for route, h := range pooled {
		if h.Observed() {
			t.RouteRate[route] = h.Rate(freshness.Prior{})
		}
	}
	t.Nu = freshness.Threshold(pages, p.CadenceCapacity*3600)
	return t, true
}

// FreshSettings are what the tuning reads of the configuration.
type FreshSettings struct {
	On      bool  // queue.policy is freshness: without it nothing is tuned
	SweepMs int64 // queue.ready.sweep_interval
	// StretchFactor is freshness.stretch_factor (FreshInput.StretchFactor); 0 is 1.
	StretchFactor float64
}

// FreshTuner tunes queue.policy freshness at every recount of a Service (Service.Freshness):
// the recount's read of every row and target also collects each row's page (Page), and the
// tuning (TuneFreshness) is published to Cell, which the Applier files due times with.
type FreshTuner struct {
	// Settings are read at every recount, so that a reload applies at the next one.
	Settings func() FreshSettings
	// Page reads a row's page for the threshold at now; ok false leaves the row out (sealed,
	// failing, never rendered).
	Page func(key []byte, row store.Row, t *store.Target, now int64) (FreshPage, bool)
	// Cell receives every tuning.
	Cell *freshness.TuningCell

	// What the last tuning planned with, filed and when (FreshInput's Prev fields), under the
	// Service's mu. Kept in memory only: a restarted worker 0 starts from the projection.
	perSecond float64
	stretch   map[string]float64
	tunedAtMs int64
	tunings   int // tunings since worker 0 started: the recount period grows with them (nextRecount)
}

// tapPages returns src with every row it hands the recount's read, and the row's target, also
// handed to fn (a row without a target is not). A sharded source stays sharded: the read walks
// the node's own shards either way.
func tapPages(src Source, fn func(key []byte, row store.Row, t *store.Target)) Source {
	tap := &pageTap{Source: src, fn: fn}
	if ss, ok := src.(ShardedSource); ok {
		return shardedPageTap{pageTap: tap, ss: ss}
	}
	if js, ok := src.(JoinedSource); ok {
		return joinedPageTap{pageTap: tap, js: js}
	}
	return tap
}

// pageTap is a recount's source that hands every row with its target to fn as the ledger's
// read passes them (it reads a row's target inside the row's callback, in order).
type pageTap struct {
	Source
	fn  func(key []byte, row store.Row, t *store.Target)
	row store.Row
}

func (p *pageTap) ForEachSchedule(prefix []byte, fn func(key []byte, row store.Row) error) error {
	return p.Source.ForEachSchedule(prefix, func(key []byte, row store.Row) error {
		p.row = row
		return fn(key, row)
	})
}

func (p *pageTap) GetTarget(key []byte) (store.Target, error) {
	t, err := p.Source.GetTarget(key)
	if err == nil {
		p.fn(key, p.row, &t)
	}
	return t, err
}

// joinedPageTap is pageTap over a JoinedSource.
type joinedPageTap struct {
	*pageTap
	js JoinedSource
}

func (p joinedPageTap) ForEachScheduleWithTarget(ctx context.Context, fn func(key []byte, row store.Row, tgt *store.Target) error) error {
	return p.js.ForEachScheduleWithTarget(ctx, func(key []byte, row store.Row, tgt *store.Target) error {
		if tgt != nil {
			p.fn(key, row, tgt)
		}
		return fn(key, row, tgt)
	})
}

// shardedPageTap is pageTap over a ShardedSource.
type shardedPageTap struct {
	*pageTap
	ss ShardedSource
}

func (p shardedPageTap) ForEachOwnedRow(ctx context.Context, fn func(key []byte, row store.Row, tgt *store.Target) error) ([]int32, error) {
	return p.ss.ForEachOwnedRow(ctx, func(key []byte, row store.Row, tgt *store.Target) error {
		if tgt != nil {
			p.fn(key, row, tgt)
		}
		return fn(key, row, tgt)
	})
}
