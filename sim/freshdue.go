package sim

import (
	"fmt"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/store"
)

// dueState is production's freshness mode in a run (DueFreshness): the threshold and the
// ceilings the Applier files due times with.
type dueState struct {
	nu float64
	// stretch is, per route class, the ceiling ÷ the row's cadence (1: the route's interval
	// is the maximum).
	stretch []float64
	// priorWeight is freshness.prior_weight.
	priorWeight float64
}

func (tr *truthRun) initDue() {
	tr.due = &dueState{nu: tr.r.cfg.Freshness.Threshold, stretch: make([]float64, len(tr.intervalMs)),
		priorWeight: tr.r.cfg.Freshness.PriorWeight}
	for k := range tr.due.stretch {
		tr.due.stretch[k] = 1
	}
}

// bounds are page i's floor and ceiling at cadence cadenceMs, as production sets them: the
// floor its cadence ÷ config.MinIntervalDivisor (the simulator's routes set no min_interval),
// the ceiling the cadence times its route's stretch.
func (tr *truthRun) bounds(i int, cadenceMs int64) (minMs, maxMs int64) {
	k := tr.r.c.Class[i]
	return cadenceMs / config.MinIntervalDivisor, int64(float64(cadenceMs) * max(1, tr.due.stretch[k]))
}

// estimates are page i's λ̂ and μ̂ at nowMs as production reads them: the estimator under the
// route's prior (the simulator's routes set no change_interval, so the cadence, as
// freshness.prior_weight pseudo-renders a cadence apart; intake's changePrior) and the
// request counter.
func (tr *truthRun) estimates(i int, cadenceMs, nowMs int64) (lambda, mu float64) {
	prior := freshness.Prior{RatePerHour: 3_600_000 / float64(max(cadenceMs, 1)), Weight: tr.due.priorWeight, IntervalMs: cadenceMs}
	return tr.hist[i].Rate(prior), tr.counters[i].PerHour(nowMs, tr.tauMs())
}

// dueAfter is the time from page i's render at nowMs to its next due time, as the Applier
// files it (freshness.DueAfter).
func (tr *truthRun) dueAfter(i int, cadenceMs, nowMs int64) int64 {
	lambda, mu := tr.estimates(i, cadenceMs, nowMs)
	minMs, maxMs := tr.bounds(i, cadenceMs)
	_, iv := freshness.DueAfter(lambda, mu, tr.due.nu, minMs, maxMs)
	return iv
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
		due := max(last+tr.dueAfter(i, cad, nowMs), nowMs)
		if due >= r.ds.DueAt(id) {
			continue
		}
		sch, err := store.NewSchedule(r.c.Keys[i], due, r.c.Submitted[i], cad, store.Lanes{})
		if err != nil {
			return fmt.Errorf("demand flush of %q: %w", r.c.Keys[i], err)
		}
		if err := r.ds.writeID(id, sch); err != nil {
			return fmt.Errorf("demand flush of %q: %w", r.c.Keys[i], err)
		}
	}
	return nil
}
