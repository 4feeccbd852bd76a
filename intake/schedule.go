package intake

import (
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// FreshParts are the parts of one freshness decision (freshness.Parts), as GET /v1/targets
// explains them.
type FreshParts = freshness.Parts

// freshInputs is what one freshness decision of a key whose route is kr reads of set: the
// route, its bounds and the configuration's (freshness.Inputs).
func freshInputs(set *Settings, kr KeyRoute) *freshness.Inputs {
	in := &freshness.Inputs{Route: kr.Policy.Name, RouteIntervalMs: kr.Policy.IntervalMs,
		MinIntervalDiv: set.Freshness.MinIntervalDiv, Threshold: set.Freshness.Threshold,
		PriorWeight: set.Freshness.PriorWeight, SweepIntervalMs: set.SweepInterval.Milliseconds(),
		MaxCadenceMs: policy.MaxCadence.Milliseconds()}
	if rt := kr.Route; rt != nil {
		in.ChangeIntervalMs, in.MinIntervalMs = rt.ChangeInterval.Milliseconds(), rt.MinInterval.Milliseconds()
	}
	return in
}

// ChangePrior is the estimator's prior (freshness.ChangePrior) under set for a key whose
// route is kr (Settings.Resolve).
func ChangePrior(set *Settings, tu *freshness.Tuning, kr KeyRoute, cadenceMs int64) freshness.Prior {
	return freshness.ChangePrior(freshInputs(set, kr), tu, cadenceMs)
}

// FreshPartsOf decides when a page whose key's route is kr (Settings.Resolve), last observed
// with f, is due again, at now (freshness.Decide, with its request rate).
func FreshPartsOf(set *Settings, tu *freshness.Tuning, kr KeyRoute, cadenceMs int64, f *store.Freshness, now int64) FreshParts {
	return freshness.Decide(freshInputs(set, kr), tu, cadenceMs, HistoryOf(f), RequestRate(set, kr, f, now))
}

// FreshSchedule is the schedule put of a row the freshness decision p files due at dueAtMs:
// its due time and its rank interval.
func FreshSchedule(p FreshParts, key []byte, dueAtMs int64, submitted bool, cadenceMs int64, lanes store.Lanes) (store.Schedule, error) {
	sch, err := store.NewSchedule(key, dueAtMs, submitted, cadenceMs, lanes)
	if err != nil {
		return store.Schedule{}, err
	}
	return sch.WithRankInterval(p.RankIntervalMs)
}

// keepRank gives sch the rank interval of row, the row it replaces, when sch files the same due
// time: a rank interval belongs to the decision that filed its due time (freshness's, in the
// Applier or the demand flush), and a write that only re-files that due time (a key's move, a
// wait, a target's update) keeps both. A write that files a due time of its own files none.
func keepRank(sch store.Schedule, row store.Row) (store.Schedule, error) {
	if sch.DueAtMs() != row.DueAtMs {
		return sch, nil
	}
	return sch.WithRankInterval(row.RankIntervalMs)
}

// FreshPlan is what worker 0's tuning reads of a row under queue.policy freshness: its route,
// its cadence and its decision's parts (its estimated rates and its floor), at now. ok is
// false for a row the tuning leaves out: sealed, failing or never rendered (their due times
// are ready's), or without a cadence.
func FreshPlan(set *Settings, tu *freshness.Tuning, key []byte, row store.Row, t *store.Target, now int64) (route string, cadenceMs int64, p FreshParts, ok bool) {
	if t == nil || t.Terminal != store.TerminalNone || row.Failing || row.NeverRendered {
		return "", 0, FreshParts{}, false
	}
	kr := set.Resolve(key)
	pr := policy.Row{Key: key, Row: row}
	pr.StoredIntervalMs = t.StoredIntervalMs // the target's, as the Applier decides
	cadenceMs, _ = set.Policy.CadenceOf(&pr, kr.Policy)
	if cadenceMs <= 0 {
		return "", 0, FreshParts{}, false
	}
	return kr.Policy.Name, cadenceMs, FreshPartsOf(set, tu, kr, cadenceMs, &t.Fresh, now), true
}

// explainFreshness is the freshness part of GET /v1/targets' explanation of a key whose route
// is kr.
func explainFreshness(set *Settings, tu *freshness.Tuning, kr KeyRoute, cadenceMs int64, f *store.Freshness, now int64) *wire.Freshness {
	p := FreshPartsOf(set, tu, kr, cadenceMs, f, now)
	ex := &wire.Freshness{Policy: set.Freshness.Policy,
		Changed: f.Changed, ChangedHours: f.ChangedHours, UnchangedHours: f.UnchangedHours, Conditional: f.Conditional,
		ChangesPerHour: p.ChangesPerHour, RequestsPerHour: p.RequestsPerHour, RequestsPrior: f.RequestsAtMs == 0,
		Threshold: p.Threshold, MinIntervalSec: float64(p.MinIntervalMs) / 1000, CrossingSec: float64(p.CrossMs) / 1000,
		IntervalSec: float64(p.IntervalMs) / 1000, RankIntervalSec: float64(p.RankIntervalMs) / 1000,
		MaxIntervalSec: float64(p.MaxIntervalMs) / 1000, Still: p.Still, ETag: f.ETag, LastModified: f.LastModified}
	if p.ChangesPerHour > 0 {
		ex.ChangeIntervalSec = 3600 / p.ChangesPerHour
	}
	if f.DigestAtMs > 0 {
		since := max(now-f.DigestAtMs, 0)
		ex.ObservedAt = ms(f.DigestAtMs)
		ex.SinceSec = float64(since) / 1000
		ex.ExpectedStale = p.StaleServesSince(since)
		ex.Marginal = p.MarginalAt(since)
	}
	return ex
}

// HistoryOf and SetHistory convert between the store's numbers and the estimator's.
func HistoryOf(f *store.Freshness) freshness.History {
	return freshness.History{Changed: f.Changed, ChangedHours: f.ChangedHours, UnchangedHours: f.UnchangedHours}
}

func SetHistory(f *store.Freshness, h freshness.History) {
	f.Changed, f.ChangedHours, f.UnchangedHours = h.Changed, h.ChangedHours, h.UnchangedHours
}
