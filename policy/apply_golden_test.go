package policy

import (
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/cockroachdb/datadriven"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/store"
)

// TestApplyGolden replays the scripts in testdata/apply: a row's state, then the outcomes of
// its renders one after another, each printing the decision Apply made. The row takes every
// decision on as worker 0's write path does (the cadence is carried, the rung, the failure
// streak and never-rendered are kept), so a script is the life of one page.
//
// Directives:
//
//	config                     YAML over the defaults (the input); prints the settings Apply reads
//	row key=K [sitemap] [carried=D] [stored=D] [rung=N] [never] [due=T]
//	                           starts a row (due defaults to +0); prints it
//	apply                      one attempt per input line: "<when> <outcome> [visited]", when
//	                           being +T (from the start), due (the row's due time) or due+D
//
// Each decision line reads: when it happened, the outcome and its class, the new due time and
// the gap to it, the cadence carried, the ladder rung (and its rung's cadence), the failure
// streak (count, class, since when), the seal and its recheck, the lane the row falls in, and
// whether the page is stored.
func TestApplyGolden(t *testing.T) {
	datadriven.Walk(t, "testdata/apply", func(t *testing.T, path string) {
		var (
			p   *Policy
			row *scriptRow
		)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "config":
				p = scriptPolicy(t, d)
				return describeApplyConfig(p)
			case "row":
				if p == nil {
					d.Fatalf(t, "row before config")
				}
				row = newScriptRow(t, d)
				return row.String(p)
			case "apply":
				if row == nil {
					d.Fatalf(t, "apply before row")
				}
				return row.applyLines(t, d, p)
			}
			d.Fatalf(t, "unknown directive %q", d.Cmd)
			return ""
		})
	})
}

// scriptRow is a row and its target as the write path keeps them between attempts.
type scriptRow struct {
	st      State
	dueMs   int64 // relative to the script's start
	failing bool
}

func newScriptRow(t *testing.T, d *datadriven.TestData) *scriptRow {
	var key string
	d.ScanArgs(t, "key", &key)
	r := &scriptRow{st: State{
		Key:              []byte(key),
		Submitted:        d.HasArg("sitemap"),
		CarriedMs:        durArg(t, d, "carried", 0),
		StoredIntervalMs: durArg(t, d, "stored", 0),
		NeverRendered:    d.HasArg("never"),
	}}
	var rung int
	if d.MaybeScanArgs(t, "rung", &rung) {
		r.st.DemandRung = uint8(rung)
	}
	var due string
	if d.MaybeScanArgs(t, "due", &due) {
		ms, err := parseRel(due)
		if err != nil {
			d.Fatalf(t, "due: %v", err)
		}
		r.dueMs = ms
	}
	return r
}

func (r *scriptRow) lane() Lane {
	return LaneOf(&Row{Row: store.Row{Projection: store.Projection{Submitted: r.st.Submitted, Lanes: store.Lanes{Failing: r.failing, NeverRendered: r.st.NeverRendered}}}})
}

func (r *scriptRow) String(p *Policy) string {
	source := "discovered"
	if r.st.Submitted {
		source = "sitemap"
	}
	return fmt.Sprintf("row %s %s carried=%s stored=%s rung=%s due=%s lane=%s\n", r.st.Key, source,
		dashDur(r.st.CarriedMs), dashDur(r.st.StoredIntervalMs), rungString(p, r.st.DemandRung), fmtRel(r.dueMs), r.lane())
}

// applyLines runs the attempts of an apply directive and prints one decision per line.
func (r *scriptRow) applyLines(t *testing.T, d *datadriven.TestData, p *Policy) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "at\toutcome\tclass\tdue\tcadence\trung\tfail\tsealed\tlane\tpage")
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "visited") {
			d.Fatalf(t, "attempt %q: want <when> <outcome> [visited]", line)
		}
		at := r.when(t, d, f[0])
		r.st.Visited = len(f) == 3
		o, ok := outcome.Parse(f[1])
		if !ok {
			o = outcome.Outcome(255) // a name no outcome has stands for a value that is not one
		}
		dec := p.Apply(r.st, o, now+at)
		r.take(dec)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s (%s)\t%s\t%s\t%s\t%s\t%s\t%s\n", fmtRel(at), f[1], dec.Class,
			fmtRel(r.dueMs), fmtDur(r.dueMs-at), fmtDur(dec.CadenceMs), rungString(p, dec.DemandRung),
			failString(dec), sealString(dec), r.lane(), pageString(dec))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// when reads an attempt's time: +T, due or due+D.
func (r *scriptRow) when(t *testing.T, d *datadriven.TestData, s string) int64 {
	if rest, ok := strings.CutPrefix(s, "due"); ok {
		if rest == "" {
			return r.dueMs
		}
		off, err := parseRel(rest)
		if err != nil {
			d.Fatalf(t, "%q: %v", s, err)
		}
		return r.dueMs + off
	}
	at, err := parseRel(s)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return at
}

// take files the decision the way worker 0's result path does: the row carries the decided
// cadence, the target keeps the rung and the failure streak.
func (r *scriptRow) take(dec Decision) {
	r.st.CarriedMs = dec.CadenceMs
	r.st.DemandRung = dec.DemandRung
	r.st.FailCount, r.st.FailClass, r.st.FailFirstMs = dec.FailCount, dec.FailClass, dec.FailFirstMs
	r.st.NeverRendered = dec.NeverRendered
	r.failing = dec.Failing
	r.dueMs = dec.DueAtMs - now
}

func dashDur(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return fmtDur(ms)
}

// rungString prints a ladder rung as "3:24h", "-" off the ladder.
func rungString(p *Policy, rung uint8) string {
	ladder := p.Options().Ladder
	if rung == 0 || int(rung) > len(ladder) {
		return "-"
	}
	return fmt.Sprintf("%d:%s", rung, fmtDur(ladder[rung-1].Milliseconds()))
}

func failString(d Decision) string {
	if d.FailCount == 0 {
		return "-"
	}
	return fmt.Sprintf("%d %s since %s", d.FailCount, d.FailClass, fmtRel(d.FailFirstMs-now))
}

func sealString(d Decision) string {
	if d.Terminal == TerminalNone {
		return "-"
	}
	return fmt.Sprintf("%s, recheck %s", d.Terminal, fmtRel(d.RecheckAtMs-now))
}

func pageString(d Decision) string {
	if d.StorePage {
		return "store"
	}
	return "-"
}

// describeApplyConfig prints every setting Apply reads, so a script's numbers can be checked
// against it by hand and a changed default shows in the diff.
func describeApplyConfig(p *Policy) string {
	o := p.Options()
	var b strings.Builder
	fmt.Fprintf(&b, "default interval %s\n", fmtDur(o.DefaultInterval.Milliseconds()))
	b.WriteString("ladder")
	for _, d := range o.Ladder {
		b.WriteString(" " + fmtDur(d.Milliseconds()))
	}
	fr := o.Retry
	fmt.Fprintf(&b, "\nretry: %d fast at %s, then ×%g per failure, at most %s; non-sitemap ×%g\n",
		fr.FastRetries, fmtDur(fr.FastDelay.Milliseconds()), fr.Factor, fmtDur(fr.MaxBackoff.Milliseconds()), fr.NonSubmittedPenalty)
	fmt.Fprintf(&b, "gone: %d strikes, recheck %s\n", o.Gone.Strikes, fmtDur(o.Gone.Recheck.Milliseconds()))
	fmt.Fprintf(&b, "noindex: %d strikes, recheck %s\n", o.Noindex.Strikes, fmtDur(o.Noindex.Recheck.Milliseconds()))
	for _, rt := range o.Routes {
		fmt.Fprintf(&b, "route %s: %s %s, interval %s\n", rt.Name, rt.Match, rt.Path, dashDur(rt.Interval.Milliseconds()))
	}
	return b.String()
}
