package sim

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
)

// Report is a run's results with what is needed to read them: the corpus, the options and the
// command that produced them.
type Report struct {
	Command string // the exact command line, for the reader to rerun
	Seed    uint64
	MixName string // where the mix came from, e.g. "sim/default-mix.yaml"
	Corpus  *Corpus
	Options Options
	Results []*Result // capacity-major, as StandardScenarios orders them
	Charts  []Chart   // written beside the report
	// BigHost, if set, is the politeness scenario's result (HostsSection).
	BigHost *BigHostResult
}

// The scheduling goal for `ready` with boost 1: within 10 % of the physical limit for every
// class at once.
const targetSlack = 1.10

func pct(c float64) string { return fmt.Sprintf("%g %%", math.Round(c*1000)/10) }

func ratio(v float64, n int) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v)
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func hours(d time.Duration) string {
	h := d.Hours()
	if h == math.Trunc(h) {
		return fmt.Sprintf("%g h", h)
	}
	return d.String()
}

// nRoute is the number of route classes; the source classes follow them in Result.Classes.
func (r *Report) nRoute() int { return len(r.Corpus.Mix.Classes) }

func (r *Report) classLabel(k int) string {
	if k < r.nRoute() {
		cl := r.Corpus.Mix.Classes[k]
		return fmt.Sprintf("%s (%s)", cl.Name, cadenceLabel(r.Corpus, k))
	}
	return []string{"submitted", "discovered"}[k-r.nRoute()]
}

// cadenceLabel describes class k's cadence: the route's, or the ladder's range under it.
func cadenceLabel(c *Corpus, k int) string {
	route := c.Mix.Classes[k].Route.Interval.D()
	mean := time.Duration(c.ClassMeanCadenceMs[k]) * time.Millisecond
	if mean >= route-time.Minute {
		return shortDur(route)
	}
	return fmt.Sprintf("ladder, mean %s, ceiling %s", shortDur(mean.Round(6*time.Minute)), shortDur(route))
}

func shortDur(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%d h", d/time.Hour)
	}
	return fmt.Sprintf("%.1f h", d.Hours())
}

// Table is the headline table: the mean age at render ÷ TTL of every class, per scenario. It is
// a deterministic function of the results: the same seed and scenarios give the same bytes.
func (r *Report) Table() string {
	var b strings.Builder
	b.WriteString("| capacity | policy |")
	for k := range r.Results[0].Classes {
		fmt.Fprintf(&b, " %s |", r.classLabel(k))
	}
	b.WriteString(" renders | idle slots | never granted |\n|---|---|")
	for range r.Results[0].Classes {
		b.WriteString("---|")
	}
	b.WriteString("---|---|---|\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %s | %s |", pct(res.Scenario.Capacity), res.Scenario.Name)
		for _, cr := range res.Classes {
			fmt.Fprintf(&b, " %s |", ratio(cr.Mean, cr.Ratios))
		}
		fmt.Fprintf(&b, " %s | %s | %s |\n", thousands(res.Renders), thousands(res.Idle), r.starvedSummary(res))
	}
	return b.String()
}

// starvedSummary is "0", or the never-granted count with the route classes it fell in.
func (r *Report) starvedSummary(res *Result) string {
	total := 0
	var parts []string
	for k := range r.nRoute() {
		if n := res.Classes[k].Starved; n > 0 {
			total += n
			parts = append(parts, fmt.Sprintf("%s %s", res.Classes[k].Name, thousands(n)))
		}
	}
	if total == 0 {
		return "0"
	}
	return fmt.Sprintf("%s (%s)", thousands(total), strings.Join(parts, ", "))
}

// Detail is the full table: per scenario and class, mean, p99 and max of age ÷ TTL, the
// standing lag, renders and pages never granted.
func (r *Report) Detail() string {
	var b strings.Builder
	b.WriteString("| capacity | policy | class | pages | renders | mean | p99 | max | standing lag | due at opening: never granted (retrying, never rendered, unpinned) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, res := range r.Results {
		for _, cr := range res.Classes {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %.1f %% | %s: %s (%s, %s, %s) |\n",
				pct(res.Scenario.Capacity), res.Scenario.Name, cr.Name, thousands(cr.Pages), thousands(cr.Renders),
				ratio(cr.Mean, cr.Ratios), ratio(cr.P99, cr.Ratios), ratio(cr.Max, cr.Ratios), 100*cr.Stale,
				thousands(cr.DueAtOpen), thousands(cr.Starved), thousands(cr.StarvedRetrying), thousands(cr.StarvedNever), thousands(cr.StarvedUnpinned))
		}
	}
	return b.String()
}

// Diagnostics is the table of what the machinery did in each scenario.
func (r *Report) Diagnostics() string {
	var b strings.Builder
	b.WriteString("| capacity | policy | capacity/h | unscheduled slots | sweeps | due rows per sweep (mean / max) | grants ready / index | stale grants | unpins | attempts ok / transient / sealed-cause | idle slots | age ÷ TTL after a failure / clean |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s / %s | %s / %s | %s | %s | %s / %s / %s | %s | %s / %s |\n",
			pct(res.Scenario.Capacity), res.Scenario.Name, thousands(int(math.Round(res.CapacityPerHour))), thousands(res.Unscheduled),
			thousands(res.Sweeps), thousands(int(math.Round(res.MeanDueRows))), thousands(res.MaxDueRows),
			thousands(res.GrantsReady), thousands(res.GrantsIndex), thousands(res.StaleGrants), thousands(res.Unpins),
			thousands(res.OK), thousands(res.Transient), thousands(res.Deterministic), thousands(res.Idle),
			ratio(res.AfterFailure.Value(), res.AfterFailure.N), ratio(res.Clean.Value(), res.Clean.N))
	}
	return b.String()
}

func (r *Report) find(name string, capacity float64) *Result {
	for _, res := range r.Results {
		if res.Scenario.Name == name && res.Scenario.Capacity == capacity {
			return res
		}
	}
	return nil
}

// worst returns the route or source class with the highest mean, and its value.
func worst(res *Result) (int, float64) {
	k, v := -1, 0.0
	for i, cr := range res.Classes {
		if cr.Ratios > 0 && cr.Mean > v {
			k, v = i, cr.Mean
		}
	}
	return k, v
}

func best(res *Result) (int, float64) {
	k, v := -1, math.Inf(1)
	for i, cr := range res.Classes {
		if cr.Ratios > 0 && cr.Mean < v {
			k, v = i, cr.Mean
		}
	}
	return k, v
}

// Sentence says in one sentence what a row of the headline table shows. It is written from
// the numbers, so it stays true when the report is regenerated.
func (r *Report) Sentence(res *Result) string {
	limit := r.Corpus.Mix.Limit(res.Scenario.Capacity)
	wk, wv := worst(res)
	bk, bv := best(res)
	if wk < 0 {
		return "Nothing was rendered in the window."
	}
	nr := r.nRoute()
	var s strings.Builder
	fmt.Fprintf(&s, "Worst %s at %.2f×, best %s at %.2f× (limit %.2f×)", res.Classes[wk].Name, wv, res.Classes[bk].Name, bv, limit)
	first, last := res.Classes[0], res.Classes[nr-1]
	var unmeasured []string
	for _, cr := range res.Classes {
		if cr.Ratios == 0 {
			unmeasured = append(unmeasured, cr.Name)
		}
	}
	switch {
	case len(unmeasured) > 0:
		fmt.Fprintf(&s, "; %s had no render to measure", strings.Join(unmeasured, " and "))
	case res.Scenario.Mode == policy.ModeEDF && first.Ratios > 0 && last.Ratios > 0:
		lag := time.Duration((first.Mean - 1) * r.Corpus.ClassHarmonicCadenceMs[0] * float64(time.Millisecond))
		fmt.Fprintf(&s, ": index order makes every class wait about the same absolute time (%s's figure says %s past due), so %s, whose cadence is shortest, is %.2f× as late as %s",
			first.Name, shortDur(lag.Round(6*time.Minute)), first.Name, first.Mean/last.Mean, last.Name)
	case wv <= targetSlack*limit:
		fmt.Fprintf(&s, ": every class is within %.0f %% of the limit at once", 100*(targetSlack-1))
	case bv < limit:
		fmt.Fprintf(&s, ": %s is held below the limit at the cost of %s", res.Classes[bk].Name, res.Classes[wk].Name)
	default:
		fmt.Fprintf(&s, ": %s is %.0f %% above the limit", res.Classes[wk].Name, 100*(wv/limit-1))
	}
	sub, disc := res.Classes[nr+extraSubmitted], res.Classes[nr+extraDiscovered]
	if starves(disc) {
		fmt.Fprintf(&s, "; the discovered lane starves: %s of its %s pages due when the window opened were never granted a render in it",
			thousands(disc.Starved), thousands(disc.DueAtOpen))
	} else if disc.Ratios > 0 && sub.Ratios > 0 && math.Abs(disc.Mean-sub.Mean) > 0.05 {
		fmt.Fprintf(&s, "; submitted %.2f× against discovered %.2f×", sub.Mean, disc.Mean)
	}
	for _, cr := range []ClassResult{sub, disc} {
		if starves(cr) || cr.Starved == 0 {
			continue
		}
		fmt.Fprintf(&s, "; %s of the %s %s pages due when the window opened were never granted in it", thousands(cr.Starved), thousands(cr.DueAtOpen), cr.Name)
		var why []string
		if cr.StarvedRetrying > 0 {
			if res.Scenario.Mode == policy.ModeStrict {
				why = append(why, fmt.Sprintf("%s retrying after a failure, which strict ranks in the cold lane", thousands(cr.StarvedRetrying)))
			} else {
				why = append(why, fmt.Sprintf("%s retrying after a failure, whose lateness restarted from zero", thousands(cr.StarvedRetrying)))
			}
		}
		if cr.StarvedNever > 0 {
			if res.Scenario.Mode == policy.ModeStrict {
				why = append(why, fmt.Sprintf("%s never rendered, which strict ranks in the cold lane", thousands(cr.StarvedNever)))
			} else {
				why = append(why, fmt.Sprintf("%s never rendered", thousands(cr.StarvedNever)))
			}
		}
		if cr.StarvedUnpinned > 0 {
			why = append(why, fmt.Sprintf("%s re-filed due now by the unpin hatch", thousands(cr.StarvedUnpinned)))
		}
		if rest := cr.Starved - cr.StarvedRetrying - cr.StarvedUnpinned - cr.StarvedNever; rest > 0 && res.Scenario.Mode == policy.ModeStrict && cr.Name == "discovered" {
			why = append(why, fmt.Sprintf("%s behind the submitted lane, which strict serves first", thousands(rest)))
		} else if rest > 0 {
			why = append(why, fmt.Sprintf("%s otherwise", thousands(rest)))
		}
		if len(why) > 0 {
			fmt.Fprintf(&s, " (%s)", strings.Join(why, "; "))
		}
	}
	s.WriteString(".")
	return s.String()
}

// starves reports whether nine in ten of a class's pages due when the window opened were never
// granted in it: the class is not being served at all, not merely slowly.
func starves(cr ClassResult) bool { return cr.DueAtOpen > 0 && 10*cr.Starved >= 9*cr.DueAtOpen }

// verdict says whether v is within goal, or by how much it misses it.
func verdict(v, goal float64) string {
	if v <= goal {
		return "met"
	}
	return fmt.Sprintf("MISSED by %.1f %%", 100*(v/goal-1))
}

// Targets compares the results with the scheduling goals, saying by how much each is met or
// missed. The goal for `ready` with boost 1 is stated against 1/c, the limit of a farm whose
// every slot serves the corpus; this farm gives the unscheduled share away, so each goal is
// judged twice: as stated, and against the limit of the slots the corpus gets.
func (r *Report) Targets() []string {
	var out []string
	nr := r.nRoute()
	u := r.Corpus.Mix.Render.Unscheduled
	for _, c := range Capacities() {
		res := r.find("ready b=1", c)
		if res == nil {
			continue
		}
		kind := "the goal"
		if c != 1 && c != 0.5 {
			kind = "the rule"
		}
		wk, wv := worst(res)
		limit := r.Corpus.Mix.Limit(c)
		line := fmt.Sprintf("`ready` boost 1 at %s: worst class %s at %.2f×. Against 1/c = %.2f× (%s, ≤ %.2f×): **%s**",
			pct(c), res.Classes[wk].Name, wv, 1/c, kind, targetSlack/c, verdict(wv, targetSlack/c))
		if wv > targetSlack/c && u > 0 {
			line += fmt.Sprintf(": 1/c gives the corpus every slot of the farm, and it gets %.1f %% of them", 100*(1-u))
		}
		line += "."
		if u > 0 {
			line += fmt.Sprintf(" Against the limit of the slots the corpus gets, 1/((1 − %g) × c) = %.2f× (≤ %.2f×): **%s**; the worst class is %.1f %% above it.",
				u, limit, targetSlack*limit, verdict(wv, targetSlack*limit), 100*(wv/limit-1))
		} else {
			line += fmt.Sprintf(" The worst class is %.1f %% above the limit.", 100*(wv/limit-1))
		}
		out = append(out, line)
	}
	for _, c := range Capacities() {
		b1, b2 := r.find("ready b=1", c), r.find("ready b=2", c)
		if b1 == nil || b2 == nil {
			continue
		}
		sub1, sub2 := b1.Classes[nr+extraSubmitted], b2.Classes[nr+extraSubmitted]
		disc2 := b2.Classes[nr+extraDiscovered]
		boost := b2.Scenario.Boost
		better := "better"
		if sub2.Mean >= sub1.Mean {
			better = "NOT better"
		}
		bound := 1 + boost*(sub2.Mean-1)
		within := "within"
		if disc2.Mean-1 > targetSlack*boost*(sub2.Mean-1) {
			within = "BEYOND"
		}
		out = append(out, fmt.Sprintf("`ready` boost %g at %s: submitted %.2f× against %.2f× with boost 1 (%s); discovered %.2f×, %s the boost's bound 1 + %g × (submitted − 1) = %.2f× (10 %% slack).",
			boost, pct(c), sub2.Mean, sub1.Mean, better, disc2.Mean, within, boost, bound))
	}
	var starvers []string
	for _, res := range r.Results {
		n := 0
		for k := range nr {
			n += res.Classes[k].Starved
		}
		if n > 0 {
			starvers = append(starvers, fmt.Sprintf("%s at %s (%s pages)", res.Scenario.Name, pct(res.Scenario.Capacity), thousands(n)))
		}
	}
	if len(starvers) == 0 {
		out = append(out, "Starvation: no page due when the window opened went ungranted under any policy.")
	} else {
		out = append(out, "Pages due when the window opened and never granted in it: "+strings.Join(starvers, "; ")+". Only `strict` is allowed any (the per-row sentences say whether the others' are the retry effect).")
	}
	for _, p := range Production {
		edf := r.find("edf", p.Capacity)
		if p.Policy != "index order" || edf == nil || edf.Classes[0].Ratios == 0 || edf.Classes[nr-1].Ratios == 0 {
			continue
		}
		h, l := edf.Classes[0], edf.Classes[nr-1]
		out = append(out, fmt.Sprintf("`edf` at %s: %s %.2f× against %s %.2f×: %.2f× as late (production's index order: %.2f× against %.2f×, %.2f× as late).",
			pct(p.Capacity), h.Name, h.Mean, l.Name, l.Mean, h.Mean/l.Mean, p.Home, p.Product, p.Home/p.Product))
	}
	return out
}

// Findings are what the run shows about production's behaviour beyond the table, each stated
// with its numbers so that it stays true (or visibly changes) when the report is regenerated.
func (r *Report) Findings() []string {
	var out []string
	if res := r.find("ready b=1", 0.5); res != nil && res.AfterFailure.N > 0 {
		out = append(out, fmt.Sprintf("**A failed attempt costs a page its place.** Under `ready b=1` at 50 %%, renders that followed a failed attempt of the same page were %.2f× late on average, against %.2f× for the rest (%s of %s renders). `policy.Apply` files a retry at now + backoff, so the lateness the page had built up no longer ranks it: under scarcity it waits its whole lateness again. It sets the tail: without those renders the p99 is %.2f× and the max %.2f×, against %.2f× and %.2f× with them. Ranking a retry by the due time it failed at, with the backoff as a not-before time, would remove it.",
			res.AfterFailure.Value(), res.Clean.Value(), thousands(res.AfterFailure.N), thousands(res.AfterFailure.N+res.Clean.N),
			res.CleanP99, res.CleanMax, res.P99, res.Max))
	}
	for _, name := range []string{"ready b=1", "ready+lanes"} {
		if res := r.find(name, 1); res != nil && res.GrantsIndex > 0 {
			out = append(out, fmt.Sprintf("**At 100 %% the ready set runs dry between sweeps.** Under `%s` %.1f %% of grants came from the floored index scan, in index order: when everything due has been granted, rows that fall due before the next sweep are served by the fallback, as designed.",
				name, 100*float64(res.GrantsIndex)/float64(res.GrantsIndex+res.GrantsReady)))
			break
		}
	}
	if res := r.find("edf", 1); res != nil && res.Idle > 0 {
		out = append(out, fmt.Sprintf("**Index order wastes capacity at 100 %%.** `edf` left %.1f %% of its render slots idle, with nothing due at that instant, while the 1 h class averaged %.2f×: index order renders a wave of long-cadence rows that fell due together in due order, the short-cadence rows wait behind it, and cadence-from-completion sends the wave back one cadence later (the 48 h period in its chart). Relative lateness breaks the wave up.",
			100*float64(res.Idle)/float64(res.Offered), res.Classes[0].Mean))
	}
	unpins, most := 0, r.Results[0]
	for _, res := range r.Results {
		unpins += res.Unpins
		if res.Unpins > most.Unpins {
			most = res
		}
	}
	if unpins > 0 {
		out = append(out, fmt.Sprintf("**The unpin hatch fires under a backlog.** The sweep filed the floor's head row forward %s times over all scenarios (most: `%s` at %s, %s times). Under scarcity the oldest due row can legitimately wait longer than `claim_floor.unpin_after` (1 h); the hatch then re-files it due now, which resets its lateness like a retry does. It touches one row per sweep, so the effect on the table is small, but it is not the wedged row the hatch was meant for.",
			thousands(unpins), most.Scenario.Name, pct(most.Scenario.Capacity), thousands(most.Unpins)))
	}
	return out
}

// EqualRenders checks that every policy did the same amount of work at each capacity: that
// what a policy changes is who is rendered, not how much. Every policy is offered the same
// slots and gives the same unscheduled share of them away; renders from the queue can then
// differ only by idle slots (a policy that lets the queue run dry at moments leaves capacity
// unused). It returns one line per capacity, and whether the check held everywhere: no policy
// used more slots than it was offered, every policy gave away the same unscheduled slots, and
// at each capacity the renders agree within 0.5 %.
func (r *Report) EqualRenders() ([]string, bool) {
	var out []string
	ok := true
	for _, c := range Capacities() {
		var parts []string
		lo, hi := math.MaxInt, 0
		var first *Result
		for _, res := range r.Results {
			if res.Scenario.Capacity != c {
				continue
			}
			if first == nil {
				first = res
			}
			lo, hi = min(lo, res.Renders), max(hi, res.Renders)
			parts = append(parts, fmt.Sprintf("%s %s", res.Scenario.Name, thousands(res.Renders)))
			switch {
			case res.Renders+res.Unscheduled+res.Idle != res.Offered || res.Renders+res.Unscheduled > res.Offered:
				ok = false
				parts[len(parts)-1] += fmt.Sprintf(" (renders + unscheduled + idle ≠ the %s slots offered)", thousands(res.Offered))
			case res.Offered != first.Offered || res.Unscheduled != first.Unscheduled:
				ok = false
				parts[len(parts)-1] += fmt.Sprintf(" (offered %s with %s unscheduled, unlike %s)", thousands(res.Offered), thousands(res.Unscheduled), first.Scenario.Name)
			case res.Idle > 0:
				parts[len(parts)-1] += fmt.Sprintf(" (%s slots idle)", thousands(res.Idle))
			}
		}
		if hi == 0 {
			continue
		}
		spread := float64(hi-lo) / float64(hi)
		verdict := "equal"
		if spread > 0.005 {
			verdict, ok = "NOT equal", false
		}
		out = append(out, fmt.Sprintf("%s: %s slots offered, %s of them unscheduled; renders from the queue: %s — spread %.2f %%: **%s**.",
			pct(c), thousands(first.Offered), thousands(first.Unscheduled), strings.Join(parts, ", "), 100*spread, verdict))
	}
	return out, ok
}

// Model is the report's account of where the corpus and the farm come from: production's
// table, what its balances say (ProductionFit), how this mix compares, and index order here
// against production's. Every number is computed, so it stays true when the mix changes.
func (r *Report) Model() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	c := r.Corpus
	f := ProductionFit()
	u := c.Mix.Render.Unscheduled
	share := func(v float64) string {
		if math.Abs(v) < 0.01 {
			return strings.Replace(fmt.Sprintf("%.2f %%", 100*v), "-", "−", 1)
		}
		return strings.Replace(fmt.Sprintf("%.1f %%", 100*v), "-", "−", 1)
	}
	spread := func(k int) string {
		return fmt.Sprintf("%s (%s – %s)", share([]float64{f.Home, f.Catalog, f.Other}[k]), share(f.Spread[k][0]), share(f.Spread[k][1]))
	}
	w("Production's table is all that was measured of the queue freshq replaces:\n\n%s\n", productionTable())
	w("Each row balances the farm's slots. A class rendered at a mean age of *r* cadences is rendered 1/*r* as often as its cadences ask, so it takes *s*/*r* of the demand, *s* being its share of the demand (renders per hour at ratio 1): Σ *s*/*r* = *c* × (1 − *other*), where *other* is the share of the farm's slots that refreshed no scheduled page. The index-order and floors rows at both capacities measure every class: four balances in three unknowns, solved by least squares (`sim.ProductionFit`; in brackets, the 5th–95th percentile when every figure moves anywhere within its rounding). The strict row is left out: its discovered pages starved, so its balance holds pages nobody measured.\n\n")
	w("| | home | catalog | product | *other*, share of the farm's slots |\n|---|---|---|---|---|\n")
	w("| production's rows | %s | %s | %s | %s |\n", spread(0), spread(1), share(f.Product), spread(2))
	failed, offered := 0, 0
	for _, res := range r.Results {
		failed += res.Transient + res.Deterministic
		offered += res.Offered
	}
	ds := demandShares(c)
	if len(ds) == 3 && offered > 0 {
		w("| this corpus and farm | %s | %s | %s | %s unscheduled + %s failed attempts = %s |\n",
			share(ds[0]), share(ds[1]), share(ds[2]), share(u), share(float64(failed)/float64(offered)), share(u+float64(failed)/float64(offered)))
	}
	w("\nEach row on its own puts *other* at ")
	for i, row := range f.Rows {
		if i > 0 {
			w(", ")
		}
		w("%s (%s, %s)", share(f.RowOther[i]), row.Policy, pct(row.Capacity))
	}
	w(": the same share of the farm at both capacities, not a fixed number of renders an hour. So:\n\n")

	w("- **A tenth of the farm went to work the cadences do not ask for.** Cadence counts from completion, so a standing lag *L* lowers the demand to Σ 1/(*T* + *L*): a farm that spends every slot on the cadences cannot stay far behind at 100 %%, because any lag frees the slots that drain it. Index order then settles minutes behind, not hours, and home is nowhere near several times product (`TestSaturationNeedsUnscheduledWork` runs this corpus without the unscheduled share to show it). Production's index order sat %s behind at 100 %% (home %.2f× = 1 + %.2f h / 1 h): its farm was saturated. What the other work was, production's figures do not say — failed and repeated renders, crawler-found URLs that are not pages, rechecks all fit, and so does a capacity label 10 %% too generous. The simulator models its size only: every claim gives the mix's `render.unscheduled` share of its slots (%s) away before it asks the queue, and failed attempts make up the rest of *other*. The corpus therefore gets (1 − %g) × *c* renders for every one its cadences ask for, and the limit no policy can beat for every class at once is 1/((1 − %g) × *c*): ",
		shortDur(time.Duration(f.Lags[0].Lag*float64(time.Hour)).Round(6*time.Minute)), 1+f.Lags[0].Lag, f.Lags[0].Lag, share(u), u, u)
	for i, cap := range Capacities() {
		if i > 0 {
			w(", ")
		}
		w("%.2f× at %s", c.Mix.Limit(cap), pct(cap))
	}
	w(". The goals are stated against 1/*c*; *Against the targets* judges them both ways.\n")
	old := [3]float64{0.13, 0.42, 0.45}
	w("- **Short-cadence pages are a small share of the demand.** The 100 %% rows pin it: with home pages at %s of the demand and catalog pages at %s (one home page per site and device over 4,000 sites, the catalog at a 9 h mean cadence), index order's row needs *other* at %s and floors' row at %s — no one farm gives both.\n",
		share(old[0]), share(old[1]), share(balanceOther(old, Production[0])), share(balanceOther(old, Production[1])))
	if len(f.Lags) == 2 && len(c.ClassHarmonicCadenceMs) == 3 {
		l0, l1 := f.Lags[0], f.Lags[1]
		w("- **The catalog's cadence.** Read as index order — every class waits the same absolute lag, so *r* = 1 + *L*/*T* — production's home figures give *L* = %.2f h at %s and %.1f h at %s. Its product figures then give *T* = %.1f h and %.1f h (the route's 48 h: the reading holds), and its catalog figures %.1f h and %.1f h: for a class on the demand ladder, 1 / E[1/cadence] over its renders. This corpus's catalog gives %.1f h (mean time between renders %.1f h).\n",
			l0.Lag, pct(l0.Capacity), l1.Lag, pct(l1.Capacity), l0.Product, l1.Product, l0.Catalog, l1.Catalog,
			c.ClassHarmonicCadenceMs[1]/3_600_000, c.ClassMeanCadenceMs[1]/3_600_000)
	}
	w("- **Discovered pages are product pages.** Production's discovery column equals its product column in every row it measured; they are 46 %% of the keys.\n\n")

	var rows []string
	nr := r.nRoute()
	for _, p := range Production {
		edf := r.find("edf", p.Capacity)
		if p.Policy != "index order" || edf == nil || nr != 3 {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %s | production's index order | %.2f× | %.2f× | %.2f× | %.2f× |", pct(p.Capacity), p.Home, p.Catalog, p.Product, p.Discovery))
		cl := edf.Classes
		rows = append(rows, fmt.Sprintf("| %s | `edf` here | %s | %s | %s | %s |", pct(p.Capacity),
			ratio(cl[0].Mean, cl[0].Ratios), ratio(cl[1].Mean, cl[1].Ratios), ratio(cl[2].Mean, cl[2].Ratios), ratio(cl[nr+extraDiscovered].Mean, cl[nr+extraDiscovered].Ratios)))
	}
	if len(rows) > 0 {
		w("Index order here — production's sweep in `policy.ModeEDF`, on this corpus and farm — against production's:\n\n| capacity | | home | catalog | product | discovered |\n|---|---|---|---|---|---|\n%s\n\n", strings.Join(rows, "\n"))
		w("The corpus's shares and the unscheduled share come from these rows' balances, which fix only Σ *s*/*r*; that production's code then holds every class one common lag behind, each at its own 1 + *L*/*T*, is the simulation's own result.\n\n")
	}
	return b.String()
}

// Markdown renders the whole report.
func (r *Report) Markdown() []byte {
	var b bytes.Buffer
	c := r.Corpus
	o := r.Options
	cfg := o.Config
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Scheduling quality under scarcity\n\n")
	w("<!-- Generated by `make sim` (sim/simreport). Do not edit: rerun it. -->\n\n")
	w("What freshq is for is the order in which it renders when capacity is short. This report measures it with `sim/`, a deterministic discrete-event simulator that drives production's own code — the sweep (`sweep.Sweeper.Sweep`, selecting with `policy`'s `Selector`), the shared-memory ready set and leases (`shm`), the claim path (`claim.Claimer`, falling back to `claim.IndexSource`), and the result decisions (`policy.Apply`: cadence from completion, demand ladder, backoff, sealing) — on a virtual clock over an in-memory due set with the store's contract.\n\n")
	w("The figure of merit is **age at render ÷ TTL**: when a page's render completes, how long since its previous successful render, in units of the cadence that render set. 1.00× is a page refreshed exactly when due. Cadence counts from completion, so at capacity *c* there are only *c* renders for every render the cadences ask for, and no policy can hold every class below **1/c** at once: that is the physical limit. Here the farm also spends a share *u* of its slots on work no cadence asks for — production's own figures say so (see *The model*) — so the corpus gets (1 − *u*) × *c* renders for every one its cadences ask for, and the limit is **1/((1 − *u*) × *c*)**.\n\n")

	w("## How this was produced\n\n")
	w("```\n%s\n```\n\n", r.Command)
	w("- Seed **%d**; the same seed and scenarios give a byte-identical table (`go test ./sim -run Determinism`).\n", r.Seed)
	w("- Corpus: %s keys from %s (", thousands(c.Len()), r.MixName)
	for k, cl := range c.Mix.Classes {
		if k > 0 {
			w(", ")
		}
		w("%s %s pages, %s renders/h, %.1f %% of the demand", cl.Name, thousands(c.ClassPages[k]), thousands(int(math.Round(c.ClassDemand[k]))), 100*c.ClassDemand[k]/c.DemandPerHour)
	}
	disc := 0
	for i := range c.Len() {
		if !c.Submitted[i] {
			disc++
		}
	}
	w("); %.1f %% discovered. Demand at ratio 1: **%s renders/hour**; capacity *c* is *c* × that.\n", 100*float64(disc)/float64(c.Len()), thousands(int(math.Round(c.DemandPerHour))))
	w("- Start: a real backlog — %.0f %% of keys overdue by up to %s, %.0f %% never rendered, the rest due within one cadence.\n",
		100*c.Mix.Backlog.Overdue, hours(c.Mix.Backlog.Depth.D()), 100*c.Mix.Backlog.NeverRendered)
	w("- **Warm-up %s** (%g × the longest route cadence, %s), then a **measured window of %s**. Only renders completing in the window count.",
		hours(o.Warmup), o.Warmup.Hours()/longestRoute(c).Hours(), hours(longestRoute(c)), hours(o.Window))
	if o.CoarseSweepEvery > 0 {
		w(" To fit the run in its time budget, the first %s of the warm-up sweep every %s; the last %s of it and the whole window sweep at the configured interval below, as after a reload (every class with a cadence under %s is re-rendered under it before anything is measured).",
			hours(o.Warmup-o.Settle), o.CoarseSweepEvery, hours(o.Settle), hours(o.Settle))
	}
	w("\n")
	sweepNote := ""
	if def := config.Default().Queue.Ready.SweepInterval; cfg.Queue.Ready.SweepInterval != def {
		shortest := longestRoute(c)
		for _, cl := range c.Mix.Classes {
			shortest = min(shortest, cl.Route.Interval.D())
		}
		sweepNote = fmt.Sprintf(" (`queue.ready.sweep_interval`; the default is %s and 1m–5m is the range to tune it in: the longer interval fits the run in its time budget, and adds on average half an interval to every wait, %.1f %% of the shortest cadence)",
			def.D(), 100*cfg.Queue.Ready.SweepInterval.D().Hours()/2/shortest.Hours())
	}
	w("- Configuration: freshq defaults with the mix's routes — sweep every **%s**%s, ready set %s entries, lease TTL %s, floor guard %s, unpin after %s, lane shares urgent ≤ %g / discovered ≥ %g / cold ≥ %g, demand ladder %s, retries %d fast at %s then ×%g (non-sitemap ×%g). The render farm claims every %s whatever its capacity allows since its last claim, and gives %.1f %% of those slots to unscheduled work before it asks the queue; renders take a log-normal %s median (σ %g), %.1f %% of attempts fail transiently, %.1f %% of pages are gone and %.1f %% noindex for good.\n\n",
		cfg.Queue.Ready.SweepInterval.D(), sweepNote, thousands(cfg.Queue.Ready.Capacity), cfg.Queue.LeaseTTL.D(), cfg.Queue.ClaimFloor.Guard.D(), cfg.Queue.ClaimFloor.UnpinAfter.D(),
		cfg.Queue.Lanes.UrgentMaxShare, *cfg.Queue.Lanes.MinShare.Discovered, *cfg.Queue.Lanes.MinShare.Cold, ladderString(cfg.Render.Demand.Ladder),
		*cfg.Render.FailureRetry.FastRetries, cfg.Render.FailureRetry.FastDelay.D(), cfg.Render.FailureRetry.Factor, cfg.Render.FailureRetry.NonSitemapPenalty,
		o.ClaimEvery, 100*c.Mix.Render.Unscheduled, c.Mix.Render.LatencyMedian.D(), c.Mix.Render.LatencySigma, 100*c.Mix.Render.Transient, 100*c.Mix.Render.Gone, 100*c.Mix.Render.Noindex)
	w("Policies: `edf` is index order (sweep mode `policy.ModeEDF`, the behaviour being replaced); `ready b=1` and `ready b=2` rank by relative lateness (`policy.ModeScore`) with `queue.ready.submitted_boost` 1 and 2 (the default); `ready+lanes` is production (`policy.ModeLanes`: relative lateness, sitemap boost 2, lane floors and the urgent cap); `strict` serves lanes in strict priority (`policy.ModeStrict`), to show starvation.\n\n")

	w("## The model, from production's figures\n\n%s", r.Model())
	w("## Mean age at render ÷ TTL\n\n")
	w("%s\n", r.Table())
	w("Classes: the three route classes, then every page again by source (sitemap-submitted or crawler-discovered, whatever its route). *Never granted*: pages already due when the window opened that were never granted a render in it.\n\n")
	w("What each row shows:\n\n")
	for _, res := range r.Results {
		w("- **%s, %s.** %s\n", pct(res.Scenario.Capacity), res.Scenario.Name, r.Sentence(res))
	}
	w("\n## Against the targets\n\n")
	w("The goals: `ready` with boost 1 within 10 %% of the physical limit for every class at once (≤ 1.10× at 100 %%, ≤ 2.2× at 50 %%); with the default boost, submitted classes better than that and discovered ones within the boost's bound; nobody starves except under `strict`. These are goals, not tuning targets: nothing in the simulator or the policy was tuned to meet them, and the mix comes from production's figures alone (see *The model*). They state the limit as 1/*c*, which counts every slot of the farm as the corpus's; with the unscheduled share taken out the corpus gets fewer, so each `ready` target is judged against both limits.\n\n")
	for _, t := range r.Targets() {
		w("- %s\n", t)
	}
	w("\nFor comparison, what the system freshq replaces measured in production:\n\n%s\n", productionTable())
	w("%s", r.CapacitySection())

	if fs := r.Findings(); len(fs) > 0 {
		w("## Findings\n\n")
		for _, f := range fs {
			w("- %s\n", f)
		}
		w("\n")
	}
	lines, ok := r.EqualRenders()
	w("## Equal work\n\n")
	w("Every policy must render the same number of pages: a policy redistributes renders, it never adds any. Every policy is offered the same render slots in the window and gives the same unscheduled share of them away; renders counted are the attempts granted (started) from the queue, every outcome. ")
	if ok {
		w("**The check holds**: at each capacity every policy used exactly the slots it was offered (renders + unscheduled + idle), gave the same slots away, and the renders agree within 0.5 %%.\n\n")
	} else {
		w("**The check does not hold everywhere**: see below. A difference in renders is slots a policy left idle (nothing due at that instant), never extra renders.\n\n")
	}
	for _, l := range lines {
		w("- %s\n", l)
	}

	w("\n## Lateness over time\n\n")
	w("Mean age ÷ TTL of the renders completed in each hour, per class, warm-up included (the dotted vertical line is the end of the warm-up; the dashed horizontal line is the limit 1/((1 − *u*) × *c*)). A class with no line rendered nothing.\n\n")
	for _, ch := range r.Charts {
		w("![%s](%s)\n\n", ch.Title, ch.Link)
	}

	w("## Per class\n\n")
	w("Mean, p99 and max of age at render ÷ TTL over the window's successful renders of pages rendered before; *standing lag* is the share of the class overdue (due, not yet rendered), averaged over hourly samples; *never granted* as above, with how many of those were retrying after a failure when the window opened, how many had never been rendered, and how many the unpin hatch had re-filed (a page can be counted under more than one).\n\n")
	w("%s\n", r.Detail())
	w("## What the machinery did\n\n")
	w("Sweeps over the whole run; due rows per sweep in the window; grants by source over the whole run (`index` is the floored-scan fallback, taken when the ready set is exhausted between sweeps); *stale grants* were ready entries whose row had been refiled since the publish; *unpins* are the sweep's unpin hatch filing the floor's head row forward to now (it had held the floor for `unpin_after`); attempts in the window by outcome class.\n\n")
	w("%s\n", r.Diagnostics())
	w("%s", r.HostsSection())
	w("## Limits of the model\n\n")
	w("- One node, one render farm paced at exactly the capacity; no worker crashes, so leases always end in a result (never by expiry), and no operator rushes (the urgent lane is empty).\n")
	w("- Visits are drawn per render with a fixed probability (see the mix): demand does not rise with lateness, so the ladder's demand is the same under every policy.\n")
	w("- The corpus is fixed: no pages are added or deleted during the run.\n")
	w("- The unscheduled work (the mix's `render.unscheduled`) is a share of every claim's slots, given away before the queue is asked: it never waits in the queue, and no policy decides about it. Production's figures pin its size, not its kind. Work that queued instead — as crawler-found pages in the cold or discovered lane, say — would be served at its arrival rate in steady state by every policy that does not starve its lane, which leaves the corpus the same slots; `strict` could starve it, and would then have more slots for the corpus than it has here.\n")
	w("- Latency does not consume capacity: the farm starts renders at the capacity rate, and a slow render delays only its own page.\n")
	if r.BigHost != nil {
		w("- Hosts answer every render the same way: none asks for a pause (429, 503 with Retry-After) and none fails more under load, so no pause and no AIMD step happens and every host's limit is its configured one (the shared host table stays empty). The politeness scenario tests the limit itself, and how the sweep and the claim path treat a host at it.\n")
	}
	return b.Bytes()
}

func longestRoute(c *Corpus) time.Duration {
	var d time.Duration
	for _, cl := range c.Mix.Classes {
		d = max(d, cl.Route.Interval.D())
	}
	return d
}

func ladderString(l []config.Duration) string {
	parts := make([]string, len(l))
	for i, d := range l {
		parts[i] = shortDur(d.D())
	}
	return strings.Join(parts, "/")
}
