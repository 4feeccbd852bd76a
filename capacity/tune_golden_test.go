package capacity

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/policy"
)

// TestGoldenTune runs testdata/tune: the freshness tuning (TuneFreshness) from a demand, a
// measured capacity and pages, as worker 0 computes it at a recount. `go test ./capacity
// -run GoldenTune -rewrite` rewrites the outputs from the code; review the diff.
//
//	tune capacity=<renders/s> backlog=<rows> sweep=<duration> [prev=<renders/s>] [boost=<b>] [window=<duration>] [renders=<n>]
//	class <route> submitted|discovered <renders/s>
//	page <route> <lambda/h> <mu/h> <cadence> <min_interval> [<changed>/<changed hours> <unchanged hours>]
func TestGoldenTune(t *testing.T) {
	datadriven.RunTest(t, "testdata/tune", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "tune" {
			d.Fatalf(t, "unknown directive %q", d.Cmd)
		}
		arg := func(key, def string) string {
			v := def
			d.MaybeScanArgs(t, key, &v)
			return v
		}
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				d.Fatalf(t, "number %q: %v", s, err)
			}
			return v
		}
		dur := func(s string) int64 {
			v, err := time.ParseDuration(s)
			if err != nil {
				d.Fatalf(t, "duration %q: %v", s, err)
			}
			return v.Milliseconds()
		}
		in := FreshInput{Boost: num(arg("boost", "2")), SweepMs: dur(arg("sweep", "1h")), PrevPerSecond: num(arg("prev", "0"))}
		in.Backlog = uint64(num(arg("backlog", "0")))
		in.Measured = Capacity{PerSecond: num(arg("capacity", "0")), WindowMs: dur(arg("window", "15m")), Renders: int64(num(arg("renders", "1000")))}
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 4 && f[0] == "class":
				cl := Class{Route: f[1], Lane: policy.LaneDiscovered, PerSecond: num(f[3])}
				if f[2] == "submitted" {
					cl.Lane, cl.Submitted = policy.LaneSubmitted, true
				}
				in.Demand.Classes = append(in.Demand.Classes, cl)
				in.Demand.Total += cl.PerSecond
			case (len(f) == 6 || len(f) == 8) && f[0] == "page":
				pg := FreshPage{Route: f[1], Lambda: num(f[2]), Mu: num(f[3]), CadenceMs: dur(f[4]), MinIntervalMs: dur(f[5])}
				if len(f) == 8 {
					n, hours, ok := strings.Cut(f[6], "/")
					if !ok {
						d.Fatalf(t, "line %q: the history is <changed>/<changed hours> <unchanged hours>", line)
					}
					pg.History = freshness.History{Changed: num(n), ChangedHours: num(hours), UnchangedHours: num(f[7])}
				}
				in.Pages = append(in.Pages, pg)
			default:
				d.Fatalf(t, "line %q: want class <route> submitted|discovered <renders/s> or page <route> <lambda> <mu> <cadence> <min>", line)
			}
		}
		tu, ok := TuneFreshness(in)
		if !ok {
			return "not tuned: the meter has measured neither a whole window nor enough renders\n"
		}
		var out strings.Builder
		fmt.Fprintf(&out, "saturated=%v capacity %.4g/s nu %.4g\n", tu.Saturated, tu.PerSecond, tu.Nu)
		routes := make([]string, 0, len(tu.Stretch))
		for r := range tu.Stretch {
			routes = append(routes, r)
		}
		slices.Sort(routes)
		for _, r := range routes {
			fmt.Fprintf(&out, "route %s: ceiling %.4f× the interval\n", r, tu.StretchFor(r))
		}
		pooled := slices.Sorted(maps.Keys(tu.RouteRate))
		for _, r := range pooled {
			fmt.Fprintf(&out, "route %s: pooled change rate %.4g/h\n", r, tu.RouteRate[r])
		}
		return out.String()
	})
}
