package sim

import (
	"fmt"
	"time"

	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/store"
)

// dueState is production's freshness mode in a run (DueFreshness): the threshold and the
// ceilings the Applier files due times with.
type dueState struct {
	nu float64
	// stretch is, per route class, the ceiling ÷ the route's interval (1: the route's interval
	// is the maximum).
	stretch []float64
	// priorWeight is freshness.prior_weight.
	priorWeight float64
	// tuning is the last tuning (nil before the first): the route classes' pooled change rates
	// (freshness.Tuning.PriorRateFor).
	tuning *freshness.Tuning

	// The tuning (capacity.TuneFreshness): the meter the completions feed, the corpus's demand
	// as the ledger holds it, the capacity the last tuning planned with, when it ran, and how
	// many tunings found the meter's window complete.
	meter     capacity.Meter
	demand    capacity.Demand
	perSecond float64
	tunedAtMs int64
	tunings   int
	// filed is the stretch the last complete tuning filed, at filedAtMs (capacity.FreshTuner's
	// state: FreshInput's PrevStretch and PrevAtMs); nil before the first.
	filed     map[string]float64
	filedAtMs int64
	pages     []capacity.FreshPage
	pageOf    []int // pages[j] is corpus page pageOf[j]
}

// FreshTuneEvery is how often a run retunes production's freshness (capacity.TuneFreshness).
// Production tunes at every capacity recount (capacity.RecountEvery, 10 minutes); the
// simulator every four hours, since a tuning reads every page and the runs are many. The
// threshold moves with the estimates and the measured capacity, both slow next to that.
const FreshTuneEvery = 4 * time.Hour

func (tr *truthRun) initDue() {
	tr.due = &dueState{nu: tr.r.cfg.Freshness.Threshold, stretch: make([]float64, len(tr.intervalMs)),
		priorWeight: tr.r.cfg.Freshness.PriorWeight}
	for k := range tr.due.stretch {
		tr.due.stretch[k] = 1
	}
	tr.due.demand = CorpusDemand(tr.r.c)
	tr.due.tunedAtMs = tr.r.c.Start
	for i := range tr.r.c.Len() {
		if tr.r.c.Fate[i] == FateOK {
			tr.due.pages = append(tr.due.pages, capacity.FreshPage{Route: tr.r.c.Mix.Classes[tr.r.c.Class[i]].Name})
			tr.due.pageOf = append(tr.due.pageOf, i)
		}
	}
}

// meter counts a completed attempt of page i at nowMs, as the write path feeds worker 0's
// meter: a retry when the page was failing.
func (tr *truthRun) meter(i int, nowMs int64) {
	if tr.due == nil {
		return
	}
	k := capacity.KindCadence
	if tr.r.failCount[i] > 0 {
		k = capacity.KindRetry
	}
	tr.due.meter.Record(nowMs, k)
}

// tune is worker 0's tuning at a recount (capacity.TuneFreshness), every FreshTuneEvery: the
// threshold and the ceilings from the meter's capacity, the ledger's demand, the due rows now
// and every page's estimates; until the meter has a whole window, the configuration's
// threshold and the routes' intervals stay.
func (tr *truthRun) tune(nowMs int64) {
	d := tr.due
	if nowMs-d.tunedAtMs < FreshTuneEvery.Milliseconds() {
		return
	}
	d.tunedAtMs = nowMs
	r := tr.r
	var backlog uint64
	for i := range r.ds.Len() {
		if due := r.ds.DueAt(int32(i)); due >= 0 && due <= nowMs {
			backlog++
		}
	}
	for j, i := range d.pageOf {
		cad := r.lastCad[i]
		if cad <= 0 {
			cad = tr.intervalMs[r.c.Class[i]]
		}
		pg := &d.pages[j]
		pg.Lambda, pg.Mu = tr.estimates(i, cad, nowMs)
		pg.CadenceMs, pg.MinIntervalMs = cad, cad/config.MinIntervalDivisor
		pg.CeilingBaseMs = tr.ceilingBaseMs(i, cad)
		pg.History = tr.hist[i]
	}
	t, ok := capacity.TuneFreshness(capacity.FreshInput{Demand: d.demand, Measured: d.meter.Rate(nowMs),
		Boost: r.cfg.Queue.Ready.SubmittedBoost, Backlog: backlog, SweepMs: r.cfg.Queue.Ready.SweepInterval.Ms(),
		PrevPerSecond: d.perSecond, PrevStretch: d.filed, PrevAtMs: d.filedAtMs, NowMs: nowMs, Pages: d.pages})
	if !ok {
		return
	}
	d.tunings++
	d.nu, d.perSecond = t.Nu, t.PerSecond
	d.filed, d.filedAtMs = t.Stretch, nowMs
	for k, cl := range r.c.Mix.Classes {
		d.stretch[k] = t.StretchFor(cl.Name)
	}
	d.tuning = &t.Tuning
}

// bounds are page i's floor and ceiling at cadence cadenceMs, as production sets them: the
// floor its cadence ÷ config.MinIntervalDivisor (the simulator's routes set no min_interval),
// the ceiling its route's interval (ceilingBaseMs) times its route's stretch, or a still
// page's (freshness.Still, freshness.Tuning.StillStretchFor); and whether that ceiling is a
// still page's longer one.
func (tr *truthRun) bounds(i int, cadenceMs int64) (minMs, maxMs int64, still bool) {
	k := tr.r.c.Class[i]
	base := tr.ceilingBaseMs(i, cadenceMs)
	stretch := max(1, tr.due.stretch[k])
	if freshness.Still(tr.hist[i], base) && stretch > 1 {
		stretch, still = stretch*freshness.StillStretchFactor, true
	}
	return cadenceMs / config.MinIntervalDivisor, int64(float64(base) * stretch), still
}

// ceilingBaseMs is what page i's ceiling stretches, as intake's ceilingBaseMs: its route's
// interval, never below its cadence.
func (tr *truthRun) ceilingBaseMs(i int, cadenceMs int64) int64 {
	return max(cadenceMs, tr.intervalMs[tr.r.c.Class[i]])
}

// estimates are page i's λ̂ and μ̂ at nowMs as production reads them: the estimator under the
// route's prior (intake's changePrior: the simulator's routes set no change_interval, so the
// rate the last tuning pooled from the route's pages, else one change a cadence, as
// freshness.prior_weight pseudo-renders; freshness.PriorAt) and the request counter.
func (tr *truthRun) estimates(i int, cadenceMs, nowMs int64) (lambda, mu float64) {
	route := tr.r.c.Mix.Classes[tr.r.c.Class[i]].Name
	prior := freshness.PriorAt(tr.due.tuning.PriorRateFor(route, cadenceMs), cadenceMs, tr.due.priorWeight)
	return tr.hist[i].Rate(prior), tr.counters[i].PerHour(nowMs, tr.tauMs())
}

// dueAfter is the time from page i's render at nowMs to its next due time and the rank
// interval it is filed with, as the Applier files them (freshness.DueAfter,
// freshness.RankInterval).
func (tr *truthRun) dueAfter(i int, cadenceMs, nowMs int64) (intervalMs, rankMs int64) {
	lambda, mu := tr.estimates(i, cadenceMs, nowMs)
	minMs, maxMs, still := tr.bounds(i, cadenceMs)
	tr.stillFiled[i] = still
	cross, iv := freshness.DueAfter(lambda, mu, tr.due.nu, minMs, maxMs, tr.leadMs)
	return iv, freshness.RankInterval(lambda, mu, tr.due.nu, cross, iv, tr.ceilingBaseMs(i, cadenceMs), maxMs)
}

// demandFlush is production's demand flush (intake's demandDue) for every page after the
// sample's requests were counted: a page now due sooner than it is filed is filed then (at
// once when that has passed), never later; a page failing, never rendered or never observed
// keeps its due time. Production flushes every minute; the simulator counts requests by the
// sample period, so it flushes then.
func (tr *truthRun) demandFlush(nowMs int64) error {
	r := tr.r
	for i := range r.c.Len() {
		last := tr.lastRender[i]
		if last < 0 || r.failCount[i] > 0 || r.never[i] || r.c.Fate[i] != FateOK {
			continue
		}
		id := int32(i)
		cad := r.lastCad[i]
		iv, rank := tr.dueAfter(i, cad, nowMs)
		due := max(last+iv, nowMs)
		if due >= r.ds.DueAt(id) {
			continue
		}
		sch, err := store.NewSchedule(r.c.Keys[i], due, r.c.Submitted[i], cad, store.Lanes{})
		if err == nil {
			sch, err = sch.WithRankInterval(rank)
		}
		if err != nil {
			return fmt.Errorf("demand flush of %q: %w", r.c.Keys[i], err)
		}
		if err := r.ds.writeID(id, sch); err != nil {
			return fmt.Errorf("demand flush of %q: %w", r.c.Keys[i], err)
		}
	}
	return nil
}
