package capacity

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Plan computes, read-only, the demand a proposed configuration would imply over the current
// rows, next to the current one, and projects both at capacity c: the what-if of
// `freshqctl plan`. It reads every row and its target once (as a recount does) and writes
// nothing.
//
// A row on the demand ladder (its target has a rung and no stored interval) carries its rung's
// cadence: under the proposal it carries the proposed ladder's rung instead (the nearest rung
// when the ladder is shorter), as its next render would file it. Every other row keeps the
// cadence it carries; routes and defaults resolve or clamp it as the proposal says.
func Plan(src Source, cur, next *policy.Policy, c Capacity, backlog uint64) (wire.Plan, error) {
	before, after := counts{}, counts{}
	nextLadder := next.Config().Render.Demand.Ladder
	err := src.ForEachSchedule(nil, func(key []byte, row store.Row) error {
		storedMs, sealed, rung := row.StoredIntervalMs, false, uint8(0)
		t, err := src.GetTarget(key)
		switch {
		case err == nil:
			storedMs, sealed, rung = t.StoredIntervalMs, t.Terminal != store.TerminalNone, t.DemandRung
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("capacity: plan: target %q: %w", key, err)
		}
		before.add(contribution(cur, key, 0, row, storedMs, sealed), 1)
		if rung > 0 && storedMs == 0 && len(nextLadder) > 0 {
			row.EffectiveIntervalMs = nextLadder[min(int(rung), len(nextLadder))-1].Ms()
		}
		after.add(contribution(next, key, 0, row, storedMs, sealed), 1)
		return nil
	})
	if err != nil {
		return wire.Plan{}, fmt.Errorf("capacity: plan: %w", err)
	}
	db, da := before.demand(nil), after.demand(nil)
	pb, pa := Project(db, c, cur.Boost(), backlog), Project(da, c, next.Boost(), backlog)
	out := wire.Plan{CapacityPerSecond: c.PerSecond, Current: side(db, pb), Proposed: side(da, pa)}
	out.Lines = planLines(cur.Config(), next.Config(), db, da, pb, pa, c)
	return out, nil
}

func side(d Demand, p Projection) wire.PlanSide {
	return wire.PlanSide{Demand: d.Total, Rows: d.Rows, DemandByLane: d.ByLane, DemandByRoute: d.ByRoute,
		LatenessByLane: p.ByLane, LatenessByRoute: p.ByRoute, Verdict: p.Verdict}
}

// planLines says what changed, one line each: every route whose interval changed, was added or
// removed, the ladder, the default interval and the boost, then the total.
func planLines(cur, next *config.Config, db, da Demand, pb, pa Projection, c Capacity) []string {
	var lines []string
	was := map[string]config.Route{}
	for _, r := range cur.Routes {
		was[r.Name] = r
	}
	seen := map[string]bool{}
	for _, r := range next.Routes {
		seen[r.Name] = true
		old, ok := was[r.Name]
		switch {
		case !ok:
			lines = append(lines, fmt.Sprintf("routes: %s (new, %s %s) %s: %s", r.Path, r.Match, r.Name, dur(r.Interval), routeChange(r.Name, db, da, pb, pa)))
		case old.Interval != r.Interval || old.Path != r.Path || old.Match != r.Match:
			path := r.Path
			if old.Path != r.Path {
				path = old.Path + " → " + r.Path
			}
			lines = append(lines, fmt.Sprintf("routes: %s %s → %s: %s", path, dur(old.Interval), dur(r.Interval), routeChange(r.Name, db, da, pb, pa)))
		}
	}
	names := make([]string, 0, len(was))
	for n := range was {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !seen[n] {
			lines = append(lines, fmt.Sprintf("routes: %s (%s) removed: its rows resolve elsewhere", was[n].Path, n))
		}
	}
	if a, b := ladderText(cur.Render.Demand.Ladder), ladderText(next.Render.Demand.Ladder); a != b {
		lines = append(lines, fmt.Sprintf("render.demand.ladder: %s → %s", a, b))
	}
	if a, b := cur.Render.DefaultInterval, next.Render.DefaultInterval; a != b {
		lines = append(lines, fmt.Sprintf("render.default_interval: %s → %s: demand of unrouted rows %s", dur(a), dur(b), change(db.ByRoute[""], da.ByRoute[""])))
	}
	if a, b := cur.Queue.Ready.SubmittedBoost, next.Queue.Ready.SubmittedBoost; a != b {
		lines = append(lines, fmt.Sprintf("queue.ready.submitted_boost: %g → %g", a, b))
	}
	lines = append(lines, fmt.Sprintf("total: demand %.3f/s → %.3f/s (%s) at capacity %.3f/s: %s → %s",
		db.Total, da.Total, change(db.Total, da.Total), c.PerSecond, pb.Verdict, pa.Verdict))
	return lines
}

// routeChange is "demand +38 %, projected catalog lateness 1.3× → 1.8×".
func routeChange(name string, db, da Demand, pb, pa Projection) string {
	label := name
	if label == "" {
		label = "unrouted"
	}
	return fmt.Sprintf("demand %s, projected %s lateness %s → %s", change(db.ByRoute[name], da.ByRoute[name]), label,
		times(pb.ByRoute[name]), times(pa.ByRoute[name]))
}

func times(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f×", v)
}

// change is the relative change from a to b, "+38 %", or "new" from nothing.
func change(a, b float64) string {
	switch {
	case a == 0 && b == 0:
		return "±0 %"
	case a == 0:
		return "new"
	}
	return fmt.Sprintf("%+.0f %%", 100*(b-a)/a)
}

func dur(d config.Duration) string {
	if d == 0 {
		return "none"
	}
	t := d.D()
	if t%(time.Hour) == 0 {
		return fmt.Sprintf("%dh", t/time.Hour)
	}
	return t.String()
}

func ladderText(l []config.Duration) string {
	if len(l) == 0 {
		return "none"
	}
	s := ""
	for i, d := range l {
		if i > 0 {
			s += "/"
		}
		s += dur(d)
	}
	return s
}
