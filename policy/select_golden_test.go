package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/cockroachdb/datadriven"
)

// TestSelectGolden replays the scripts in testdata/select: a hand-written candidate set, then
// the order a Selector publishes it in, per mode.
//
// Directives:
//
//	candidates                 one candidate per input line: "<id> <lane> <score> <due>", due
//	                           relative to now (-2h: due two hours ago); offered in this order
//	select mode=M k=K [urgent=U] [discovered=D] [cold=C]
//	                           M is lanes, score, edf or strict; the shares default to 0
//
// Each selected item prints its position, id, lane, score and due time, then how many items of
// each lane the prefix ending there holds (u s d c), so the urgent cap ⌈U·m⌉ and the floors
// ⌊D·m⌋ and ⌊C·m⌋ can be checked row by row.
func TestSelectGolden(t *testing.T) {
	datadriven.Walk(t, "testdata/select", func(t *testing.T, path string) {
		var cands []goldenCand
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "candidates":
				cands = parseCands(t, d)
				return describeCands(cands)
			case "select":
				return selectLines(t, d, cands)
			}
			d.Fatalf(t, "unknown directive %q", d.Cmd)
			return ""
		})
	})
}

type goldenCand struct {
	id    string
	lane  Lane
	score float64
	due   int64 // relative to now
}

func parseLane(s string) (Lane, bool) {
	for l := range NumLanes {
		if l.String() == s {
			return l, true
		}
	}
	return 0, false
}

func parseCands(t *testing.T, d *datadriven.TestData) []goldenCand {
	var out []goldenCand
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			d.Fatalf(t, "candidate %q: want <id> <lane> <score> <due>", line)
		}
		lane, ok := parseLane(f[1])
		if !ok {
			d.Fatalf(t, "candidate %q: unknown lane", line)
		}
		score, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			d.Fatalf(t, "candidate %q: %v", line, err)
		}
		due, err := parseRel(f[3])
		if err != nil {
			d.Fatalf(t, "candidate %q: %v", line, err)
		}
		out = append(out, goldenCand{id: f[0], lane: lane, score: score, due: due})
	}
	return out
}

func describeCands(cs []goldenCand) string {
	var n [NumLanes]int
	for _, c := range cs {
		n[c.lane]++
	}
	return fmt.Sprintf("%d candidates: urgent %d, submitted %d, discovered %d, cold %d\n",
		len(cs), n[LaneUrgent], n[LaneSubmitted], n[LaneDiscovered], n[LaneCold])
}

var goldenModes = map[string]Mode{"lanes": ModeLanes, "score": ModeScore, "edf": ModeEDF, "strict": ModeStrict}

func selectLines(t *testing.T, d *datadriven.TestData, cs []goldenCand) string {
	var name string
	var k int
	d.ScanArgs(t, "mode", &name)
	d.ScanArgs(t, "k", &k)
	mode, ok := goldenModes[name]
	if !ok {
		d.Fatalf(t, "mode %q: want lanes, score, edf or strict", name)
	}
	var sh Shares
	d.MaybeScanArgs(t, "urgent", &sh.UrgentMax)
	d.MaybeScanArgs(t, "discovered", &sh.DiscoveredMin)
	d.MaybeScanArgs(t, "cold", &sh.ColdMin)

	sel := NewSelector[string](k, mode, sh)
	for _, c := range cs {
		sel.Offer(c.lane, c.score, now+c.due, c.id)
	}
	items := sel.Result()

	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d\n", mode, len(items), len(cs))
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "pos\tid\tlane\tscore\tdue\tu\ts\td\tc")
	var n [NumLanes]int
	for i, it := range items {
		n[it.Lane]++
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", i+1, it.Value, it.Lane,
			strconv.FormatFloat(it.Score, 'g', -1, 64), fmtRel(it.DueAtMs-now),
			n[LaneUrgent], n[LaneSubmitted], n[LaneDiscovered], n[LaneCold])
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if mode == ModeLanes {
		b.WriteString(prefixBounds(items, sh))
	}
	return b.String()
}

// prefixBounds states the lanes-mode promise for this result: in every prefix of length m the
// urgent lane holds at most ⌈U·m⌉ while another lane still has rows to come, and cold and
// discovered at least ⌊C·m⌋ and ⌊D·m⌋ while they have rows to come. It prints that the promise
// holds, or the first prefix that breaks it, so a rewrite cannot record a broken order silently.
func prefixBounds(items []Item[string], sh Shares) string {
	var avail, n [NumLanes]int
	for _, it := range items {
		avail[it.Lane]++
	}
	others := len(items) - avail[LaneUrgent]
	for i, it := range items {
		n[it.Lane]++
		m := float64(i + 1)
		othersLeft := others - (i + 1 - n[LaneUrgent])
		if capU := math.Ceil(sh.UrgentMax * m); othersLeft > 0 && float64(n[LaneUrgent]) > capU {
			return fmt.Sprintf("prefix %d: urgent %d over its cap %g\n", i+1, n[LaneUrgent], capU)
		}
		for _, f := range []struct {
			lane  Lane
			share float64
		}{{LaneCold, sh.ColdMin}, {LaneDiscovered, sh.DiscoveredMin}} {
			if floor := math.Floor(f.share * m); n[f.lane] < avail[f.lane] && float64(n[f.lane]) < floor {
				return fmt.Sprintf("prefix %d: %s %d under its floor %g\n", i+1, f.lane, n[f.lane], floor)
			}
		}
	}
	return "every prefix: urgent within its cap, cold and discovered at their floors\n"
}
