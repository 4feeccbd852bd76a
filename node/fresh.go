package node

import (
	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// backlogOf reads the due rows of worker 0's last sweep, every lane, from its block (w).
func backlogOf(w *shm.Worker) func() uint64 {
	return func() uint64 {
		n := uint64(0)
		for l := range policy.NumLanes {
			n += w.Load(shm.CounterBacklog + shm.Counter(l))
		}
		return n
	}
}

// freshPage is a row's page as the freshness tuning reads it (intake.FreshPlan, under the
// tuning in force, tu), with the page's own observations for its route's pooled prior.
func freshPage(set *intake.Settings, tu *freshness.Tuning, key []byte, row store.Row, t *store.Target, now int64) (capacity.FreshPage, bool) {
	route, cadenceMs, p, ok := intake.FreshPlan(set, tu, key, row, t, now)
	if !ok {
		return capacity.FreshPage{}, false
	}
	return capacity.FreshPage{Route: route, Lambda: p.ChangesPerHour, Mu: p.RequestsPerHour, CadenceMs: cadenceMs,
		CeilingBaseMs: p.CeilingBaseMs, MinIntervalMs: p.MinIntervalMs, History: freshness.History{Changed: t.Fresh.Changed,
			ChangedHours: t.Fresh.ChangedHours, UnchangedHours: t.Fresh.UnchangedHours}}, true
}
