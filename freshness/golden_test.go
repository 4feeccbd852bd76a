package freshness

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// The golden scripts under testdata/ are datadriven files: a directive, its input, "----", and
// the output the code must produce. `go test ./freshness -rewrite` rewrites every output from
// the code as it is; review the diff before committing it. Rates are per hour; durations are Go
// durations (90m, 6h, 720h).

func TestGolden(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "estimate":
				return runEstimate(t, d)
			case "score":
				return runScore(t, d)
			case "oracle":
				return runOracle(t, d)
			case "counter":
				return runCounter(t, d)
			case "threshold":
				return runThreshold(t, d)
			}
			d.Fatalf(t, "unknown directive %q", d.Cmd)
			return ""
		})
	})
}

func ms(t *testing.T, d *datadriven.TestData, s string) int64 {
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "duration %q: %v", s, err)
	}
	return v.Milliseconds()
}

func num(t *testing.T, d *datadriven.TestData, s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		d.Fatalf(t, "number %q: %v", s, err)
	}
	return v
}

func argNum(t *testing.T, d *datadriven.TestData, key string) float64 {
	var s string
	if !d.MaybeScanArgs(t, key, &s) {
		return 0
	}
	return num(t, d, s)
}

func argDur(t *testing.T, d *datadriven.TestData, key string) int64 {
	var s string
	if !d.MaybeScanArgs(t, key, &s) {
		return 0
	}
	return ms(t, d, s)
}

// interval prints a rate per hour as the mean interval it implies.
func interval(perHour float64) string {
	if perHour <= 0 {
		return "never"
	}
	return time.Duration(float64(time.Hour) / perHour).Round(time.Second).String()
}

// estimate prior-rate=R prior-weight=W prior-interval=D
// changed 6h | unchanged 12h   (one render per line)
func runEstimate(t *testing.T, d *datadriven.TestData) string {
	p := Prior{RatePerHour: argNum(t, d, "prior-rate"), Weight: argNum(t, d, "prior-weight"), IntervalMs: argDur(t, d, "prior-interval")}
	var h History
	var obs []Observation
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 || (f[0] != "changed" && f[0] != "unchanged") {
			d.Fatalf(t, "line %q: want changed|unchanged <duration>", line)
		}
		o := Observation{Changed: f[0] == "changed", IntervalMs: ms(t, d, f[1])}
		obs = append(obs, o)
		h.Observe(o)
	}
	r, m := h.Rate(p), Exact(obs, p)
	return fmt.Sprintf("history changed=%g changed-hours=%g unchanged-hours=%g\nrate  %.4f/h (every %s)\nexact %.4f/h (every %s)\n",
		h.Changed, h.ChangedHours, h.UnchangedHours, r, interval(r), m, interval(m))
}

// score lambda=L mu=M min=D max=D lead=D
// one elapsed time per line
func runScore(t *testing.T, d *datadriven.TestData) string {
	l, m := argNum(t, d, "lambda"), argNum(t, d, "mu")
	b := Bounds{MinIntervalMs: argDur(t, d, "min"), MaxIntervalMs: argDur(t, d, "max"), LeadMs: argDur(t, d, "lead")}
	var out strings.Builder
	fmt.Fprintf(&out, "%-8s %-12s %-12s %s\n", "since", "stale", "marginal", "score")
	for _, line := range strings.Fields(d.Input) {
		since := ms(t, d, line)
		score := fmt.Sprintf("%.6g", Score(l, m, since, b))
		if s := Score(l, m, since, b); s >= OverdueBase {
			score = fmt.Sprintf("overdue + %.4g ceilings", s-OverdueBase)
		}
		fmt.Fprintf(&out, "%-8s %-12.6g %-12.6g %s\n", line, StaleServes(l, m, since), Marginal(l, m, since), score)
	}
	return out.String()
}

// oracle budget=B
// lambda mu min-per-hour max-per-hour   (one page per line)
func runOracle(t *testing.T, d *datadriven.TestData) string {
	budget := argNum(t, d, "budget")
	var pages []Page
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			d.Fatalf(t, "line %q: want lambda mu min-per-hour max-per-hour", line)
		}
		pages = append(pages, Page{Lambda: num(t, d, f[0]), Mu: num(t, d, f[1]), MinPerHour: num(t, d, f[2]), MaxPerHour: num(t, d, f[3])})
	}
	plan := Optimal(pages, budget)
	var out strings.Builder
	sum, stale, req := 0.0, 0.0, 0.0
	fmt.Fprintf(&out, "nu %.4g bound=%v\n", plan.Nu, plan.Bound)
	for i, p := range pages {
		f := plan.PerHour[i]
		sum += f
		stale += p.Mu * StaleShare(p.Lambda, f)
		req += p.Mu
		fmt.Fprintf(&out, "page %d: %.4f/h (every %s) stale share %.4f\n", i, f, interval(f), StaleShare(p.Lambda, f))
	}
	fmt.Fprintf(&out, "total %.4f/h, stale requests %.4f of %.4f/h\n", sum, stale, req)
	return out.String()
}

// counter prior=R tau=D
// +<duration> add N | +<duration> rate
func runCounter(t *testing.T, d *datadriven.TestData) string {
	tau := argDur(t, d, "tau")
	c := NewCounter(0, argNum(t, d, "prior"), tau)
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], "+") {
			d.Fatalf(t, "line %q: want +<duration> add N | +<duration> rate", line)
		}
		at := ms(t, d, f[0][1:])
		switch {
		case f[1] == "add" && len(f) == 3:
			c.Add(at, num(t, d, f[2]), tau)
		case f[1] == "rate" && len(f) == 2:
			fmt.Fprintf(&out, "%s rate %.4f/h\n", f[0], c.PerHour(at, tau))
		default:
			d.Fatalf(t, "line %q: want +<duration> add N | +<duration> rate", line)
		}
	}
	return out.String()
}

// threshold budget=F
// <lambda> <mu> <min-per-hour> <max-per-hour>   (one page a line)
//
// The multiplier ν that spends the budget (Threshold), and each page's due interval under it
// as production files it (DueAfter, floor 1/max-per-hour, ceiling 1/min-per-hour).
func runThreshold(t *testing.T, d *datadriven.TestData) string {
	budget := argNum(t, d, "budget")
	var pages []Page
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			d.Fatalf(t, "line %q: want lambda mu min-per-hour max-per-hour", line)
		}
		pages = append(pages, Page{Lambda: num(t, d, f[0]), Mu: num(t, d, f[1]), MinPerHour: num(t, d, f[2]), MaxPerHour: num(t, d, f[3])})
	}
	nu := Threshold(pages, budget)
	var out strings.Builder
	fmt.Fprintf(&out, "nu %.4g\n", nu)
	sum := 0.0
	for i, p := range pages {
		minMs, maxMs := int64(0), int64(0)
		if p.MaxPerHour > 0 {
			minMs = int64(msPerHour / p.MaxPerHour)
		}
		if p.MinPerHour > 0 {
			maxMs = int64(msPerHour / p.MinPerHour)
		}
		cross, iv := DueAfter(p.Lambda, p.Mu, nu, minMs, maxMs, 0)
		sum += msPerHour / float64(iv)
		fmt.Fprintf(&out, "page %d: due every %s (crossing %s)\n", i, time.Duration(iv)*time.Millisecond, time.Duration(cross)*time.Millisecond)
	}
	fmt.Fprintf(&out, "asked %.4f/h of %.4f/h\n", sum, budget)
	return out.String()
}
