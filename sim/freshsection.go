package sim

import (
	"fmt"
	"slices"
	"strings"
)

// FreshHeading opens the freshness section of docs/SIMULATION.md. SpliceFreshSection replaces
// everything from it to the end of the report.
const FreshHeading = "## Freshness of content: requests served stale"

// FreshSection is the freshness comparison's section of docs/SIMULATION.md: how it was run
// (command), the table of rows, the chart, and each mix's figures against the targets, read
// from the rows. It is a deterministic function of its arguments.
func FreshSection(rows []FreshRow, command string, chart *Chart) string {
	var b strings.Builder
	b.WriteString(FreshHeading + "\n\n")
	b.WriteString("Age ÷ cadence is a proxy; what a crawler gets is a page whose content matches the site or does not. This section measures that share, for index order, `ready`, production's `freshness` policy, the freshness scorer the simulator used before production had the mode, and an oracle, on a corpus with ground truth. `make sim` writes it after the tables above, from\n\n")
	fmt.Fprintf(&b, "```\n%s\n```\n\n", command)
	b.WriteString("(`sim/freshreport`, deterministic for its seeds; `make sim-freshness OUT=FILE KEYS=N` runs the same comparison alone and writes its rows as JSON, `sim.FreshRow`).\n\n")
	b.WriteString(`**Ground truth** (` + "`sim/truth.go`" + `). The corpus is the default mix on production's 48 sites. Every page has a hidden change process and a request rate, drawn independently of each other (so popularity says nothing about change):

- *standard*: 40 % of pages never change; 10 % change only in a daily one-hour burst (4 changes an hour in it, at a time of day drawn per page); the rest are Poisson, their mean interval log-normal with a median of 4 days and σ 1.8, clamped to 1 h – 180 days. Requests: Zipf (exponent 1) over a random ranking of the pages, 1 per page-hour on average.
- *held-out*: another corpus seed and another truth seed, its distributions fixed before any result was seen: 25 % never change, 15 % change in daily 3 h bursts at 1 an hour, the rest with a median interval of 36 h (σ 1.2, 30 m – 60 days); Zipf 0.7, 0.2 requests per page-hour.

A request is served stale when the page changed since its last successful render. The share is Σ μᵢ·(time page i was stale) ÷ Σ μᵢ·window over the pages that can render: the expectation over request arrivals, given the run's own changes and renders (` + "`TestStaleShareMatchesTheModel`" + ` checks it against the closed form).

**Policies**, all through the production sweep, selector (lanes mode), ready buffer and claim path:

- *index*: due order (` + "`policy.ModeEDF`" + `). *ready*: production's (` + "`ready+lanes`" + `).
- *freshness*: production's ` + "`queue.policy: freshness`" + `, no scorer: after a success the row is filed due when its marginal value h reaches the threshold ν, within its floor and ceiling (` + "`freshness.DueAfter`" + `, as the Applier files it), from the page's change rate estimated from the run's own renders (` + "`freshness.History`" + ` under production's prior: the change rate the last tuning pooled from the route's pages, one change an interval before the first, ` + "`freshness.prior_weight`" + ` pseudo-renders) and its request rate (` + "`freshness.Counter`" + ` with ` + "`freshness.request_tau`" + `, 24 h, fed hourly with the simulated requests, a rise bringing the due time forward as the demand flush does). ν and the ceilings follow capacity as worker 0 tunes them (` + "`capacity.TuneFreshness`" + `, every 4 simulated hours, production at every 10-minute recount): ν is the water-filling multiplier (` + "`freshness.Threshold`" + `) over every page's estimates at the capacity the run's ` + "`capacity.Meter`" + ` measured, and each page's ceiling its route's interval times the longest age ÷ cadence ` + "`capacity.Project`" + ` projects ready to leave the route's classes at that capacity (1 while capacity suffices), smoothed over tunings with an 80-hour time constant (` + "`capacity.SmoothStretch`" + `). A page that does not reach ν by its ceiling is due one sweep interval before it. Each due time is filed with its rank interval (` + "`freshness.RankInterval`" + `: ν ÷ the marginal value's growth at the crossing, the route's interval for a row filed at its ceiling), a retry after a transient failure of a page rendered before with the shortest one, a millisecond (` + "`freshness.RetryRank`" + `), and the sweep ranks the due rows by lateness ÷ rank interval and merges class heads, as production does.
- *freshness-scorer*: the same lanes selection, ranked (` + "`policy.Policy.WithScorer`" + `) by ` + "`freshness.Score`" + `: the stale serves a render now would prevent, from the page's change rate (` + "`freshness.History`" + ` with a per-route prior pooled from the run's renders) and its request rate (τ 72 h). After a success the row is filed due at its floor, so every row past its floor is a candidate and the score decides. Production cannot rank this way without widening the sweep's classes by λ and μ; it stays as the yardstick of what ranking by h itself gains.
- *oracle*: ranks by lateness against its optimal interval 1/fᵢ, fᵢ from ` + "`freshness.Optimal`" + ` on the true λᵢ and μᵢ (water-filling the Lagrangian) for the renders that reach the corpus, within the same bounds.

The scored runs read the whole due set at every sweep: the sweep's class merge bounds what a class can still give by relative lateness, which orders a class as its due times do, and a freshness score does not.

**Bounds.** The floor (` + "`min_interval`" + `) is each route's interval ÷ 16. For production's freshness the ceiling is its tuning's (above). For the scorer and the oracle it is each route's 99th percentile of the time ` + "`ready`" + ` itself left between two renders of a page at the same capacity, over the renders that did not follow a failed attempt (at least the route's interval): each capacity runs ready first, then the scorer and the oracle with that ceiling. A row ranks above every row inside its bounds from one sweep interval before its ceiling (` + "`freshness.Bounds.LeadMs`" + `), so that it is published by the last sweep before the ceiling, not the first after it.

`)
	b.WriteString(FreshTable(rows))
	b.WriteString("\n\"vs ready\" and \"vs oracle\" compare the stale share with theirs at the same mix and capacity. The route columns give the longest time between two successful renders of a page, the longest of those that did not follow a failed attempt (a retry waits for a grant like any row), and the 99th percentile, each ÷ the route's interval (home is one page on two devices); for freshness, over the intervals of pages not filed as still (seen unchanged at every render over at least the route's interval: their ceiling under scarcity is `freshness.StillStretchFactor` times further past the interval, `freshness.Tuning.StillStretchFor`), whose longest is given apart below.\n\n")
	if chart != nil {
		fmt.Fprintf(&b, "![%s](%s)\n\n", chart.Title, chart.Link)
	}
	b.WriteString("**Against the targets**, read from the rows above:\n\n")
	for _, mix := range freshMixes(rows) {
		for _, capacity := range freshCapacities(rows, mix) {
			get := func(policy string) *FreshRow { return findFresh(rows, mix, capacity, policy) }
			ready, fresh, oracle := get("ready"), get("freshness"), get("oracle")
			if ready == nil || fresh == nil || oracle == nil || ready.StaleShare == 0 || oracle.StaleShare == 0 {
				continue
			}
			fmt.Fprintf(&b, "- *%s, %s*: freshness serves %s stale requests than ready (the oracle %s), %s the oracle.",
				mix, pct(capacity), fewer(fresh.StaleShare, ready.StaleShare), fewer(oracle.StaleShare, ready.StaleShare),
				against(fresh.StaleShare, oracle.StaleShare))
			var over []string
			for _, k := range sortedKeys(fresh.RouteMax) {
				if fresh.RouteMax[k] > ready.RouteMax[k]+0.005 {
					over = append(over, fmt.Sprintf("%s %.2f× against ready's %.2f× (%.2f× without a failure%s)", k, fresh.RouteMax[k], ready.RouteMax[k], fresh.RouteMaxClean[k], heldFailures(fresh, ready, k)))
				}
			}
			if len(over) == 0 {
				b.WriteString(" No route's longest interval is past ready's.")
			} else {
				fmt.Fprintf(&b, " Longest interval past ready's: %s.", strings.Join(over, "; "))
			}
			var still []string
			for _, k := range sortedKeys(fresh.RouteMaxStill) {
				if v := fresh.RouteMaxStill[k]; v > 0 {
					still = append(still, fmt.Sprintf("%s %.2f×", k, v))
				}
			}
			if len(still) > 0 {
				fmt.Fprintf(&b, " Pages filed as still, apart: %s.", strings.Join(still, ", "))
			}
			if ready.StillRenders > 0 {
				fmt.Fprintf(&b, " Pages that never change rendered %d times against ready's %d (%.2f×).", fresh.StillRenders, ready.StillRenders, float64(fresh.StillRenders)/float64(ready.StillRenders))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\nLane floors: the scored runs select through the same `policy.Selector` in lanes mode, so every prefix of the published set keeps the floors (`policy` tests).\n")
	return b.String()
}

// SpliceFreshSection returns report with its freshness section (from FreshHeading to the end)
// replaced by section, or section appended when it has none.
func SpliceFreshSection(report, section string) string {
	if i := strings.Index(report, "\n"+FreshHeading+"\n"); i >= 0 {
		report = report[:i+1]
	}
	if report = strings.TrimRight(report, "\n"); report != "" {
		report += "\n\n"
	}
	return report + section
}

func fewer(v, ref float64) string {
	d := 100 * (1 - v/ref)
	if d >= 0 {
		return fmt.Sprintf("%.1f %% fewer", d)
	}
	return fmt.Sprintf("%.1f %% more", -d)
}

func against(v, oracle float64) string {
	d := 100 * (v/oracle - 1)
	switch {
	case d > 0:
		return fmt.Sprintf("%.1f %% above", d)
	case d < 0:
		return fmt.Sprintf("%.1f %% below", -d)
	}
	return "level with"
}

func findFresh(rows []FreshRow, mix string, capacity float64, policy string) *FreshRow {
	for i := range rows {
		if rows[i].Mix == mix && rows[i].Capacity == capacity && rows[i].Policy == policy {
			return &rows[i]
		}
	}
	return nil
}

func freshMixes(rows []FreshRow) []string {
	var out []string
	for _, r := range rows {
		if !slices.Contains(out, r.Mix) {
			out = append(out, r.Mix)
		}
	}
	return out
}

func freshCapacities(rows []FreshRow, mix string) []float64 {
	var out []float64
	for _, r := range rows {
		if r.Mix == mix && !slices.Contains(out, r.Capacity) {
			out = append(out, r.Capacity)
		}
	}
	return out
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// heldFailures says how many failed attempts the longest interval of route k held under fresh
// and under ready, when fresh's held any: each retry waits for the next sweep to be published,
// so a run whose longest interval held two failures and one whose held none compare the luck
// of the draws as much as the policies.
func heldFailures(fresh, ready *FreshRow, k string) string {
	n := fresh.RouteMaxFailures[k]
	if n == 0 {
		return ""
	}
	attempts := func(n int) string {
		if n == 1 {
			return "1 failed attempt"
		}
		return fmt.Sprintf("%d failed attempts", n)
	}
	return fmt.Sprintf("; the longest held %s, ready's %d", attempts(n), ready.RouteMaxFailures[k])
}
