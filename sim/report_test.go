package sim

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeResults builds results by hand (no run) for every standard scenario: a class's mean is
// 1/c, except edf's home, which is far worse, and strict's discovered, which starves.
func fakeResults(c *Corpus) []*Result {
	var out []*Result
	for _, sc := range StandardScenarios() {
		r := &Result{Scenario: sc, CapacityPerHour: sc.Capacity * c.DemandPerHour, Renders: 1000, Offered: 1000,
			SampleEvery: time.Hour, Warmup: 4 * time.Hour}
		names := []string{"home", "catalog", "product", "submitted", "discovered"}
		for k, n := range names {
			cr := ClassResult{Name: n, Pages: 100, Renders: 50, Ratios: 50, Mean: 1 / sc.Capacity, P99: 1.5 / sc.Capacity, Max: 2 / sc.Capacity, DueAtOpen: 10}
			if sc.Name == "edf" && k == 0 {
				cr.Mean = 10 / sc.Capacity
			}
			if sc.Name == "strict" && n == "discovered" {
				cr.Ratios, cr.Mean, cr.Starved = 0, 0, 10
			}
			r.Classes = append(r.Classes, cr)
			series := make([]float64, 8)
			for p := range series {
				series[p] = cr.Mean + 0.01*float64(p)
			}
			if cr.Ratios == 0 {
				for p := range series {
					series[p] = math.NaN()
				}
			}
			r.Series = append(r.Series, series)
		}
		out = append(out, r)
	}
	return out
}

func TestReportSaysWhatItMeasured(t *testing.T) {
	c := corpus(t)
	rep := &Report{Command: "go run ./sim/simreport -seed 1", Seed: 1, MixName: "default", Corpus: c,
		Options: testOptions(), Results: fakeResults(c)}
	rep.Options, _ = rep.Options.WithDefaults()
	md := string(rep.Markdown())
	for _, want := range []string{
		"go run ./sim/simreport -seed 1", "Seed **1**", "Warm-up " + hours(testWarmup), "| 50 % | strict |",
		"the discovered lane starves", "**met**", "## Equal work", "**The check holds**",
		"## The model, from production's figures", "| production's rows |", "Against the limit of the slots the corpus gets",
		"| 100 % | production's index order | 4.78× |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if n := strings.Count(md, "\n- **"); n < len(rep.Results) {
		t.Errorf("%d row sentences for %d rows", n, len(rep.Results))
	}
	// A miss is reported with its size, not hidden.
	rep.Results[11].Classes[0].Mean = 2.42 // ready b=1 at 50 %
	if ts := strings.Join(rep.Targets(), "\n"); !strings.Contains(ts, "MISSED by 10.0 %") {
		t.Errorf("targets do not report the miss:\n%s", ts)
	}
}

func TestChartsAreDeterministicSVG(t *testing.T) {
	c := corpus(t)
	res := fakeResults(c)
	var first [][]byte
	for run := range 2 {
		dir := t.TempDir()
		charts, err := WriteCharts(dir, "sim", res, c.Mix)
		if err != nil {
			t.Fatal(err)
		}
		if len(charts) != len(Policies()) {
			t.Fatalf("%d charts for %d policies", len(charts), len(Policies()))
		}
		for i, ch := range charts {
			b, err := os.ReadFile(ch.Path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte("<?xml")) || !bytes.Contains(b, []byte("<svg")) {
				t.Fatalf("%s is not an SVG", ch.Path)
			}
			if filepath.Dir(ch.Link) != "sim" {
				t.Fatalf("link %q", ch.Link)
			}
			if run == 0 {
				first = append(first, b)
			} else if !bytes.Equal(first[i], b) {
				t.Fatalf("%s differs between two writes", filepath.Base(ch.Path))
			}
		}
	}
}
