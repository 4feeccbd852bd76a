package sim

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/freshq/freshq/config"
)

const testStart = int64(1_800_000_000_000)

func TestDefaultMixIsTheDocumentedOne(t *testing.T) {
	m := DefaultMix()
	if m.Keys != 1_600_000 || len(m.Devices) != 2 || len(m.Classes) != 3 {
		t.Fatalf("default mix %+v", m)
	}
	want := map[string]float64{"home": 3_600_000, "catalog": 24 * 3_600_000, "product": 48 * 3_600_000}
	disc := 0.0
	for _, c := range m.Classes {
		if float64(c.Route.Interval.Ms()) != want[c.Name] {
			t.Errorf("%s: route interval %s", c.Name, c.Route.Interval)
		}
		disc += c.Share * c.Discovered
	}
	if math.Abs(disc-0.46) > 0.005 {
		t.Errorf("discovered share %.3f, want 0.46", disc)
	}
}

func TestParseMixIsStrict(t *testing.T) {
	good := string(DefaultMixYAML())
	_, err := ParseMix([]byte(strings.Replace(good, "  overdue: 0.33", "  overdue: 0.33\n  overdew: 0.1", 1)))
	if !errors.Is(err, ErrInvalidMix) || !strings.Contains(err.Error(), "overdew") {
		t.Fatalf("unknown key: %v", err)
	}
	line := strings.Count(good[:strings.Index(good, "  overdue: 0.33")], "\n") + 2
	if !strings.Contains(err.Error(), "["+strconv.Itoa(line)+":") {
		t.Errorf("the error does not name line %d: %v", line, err)
	}
	for name, edit := range map[string][2]string{
		"shares":    {"share: 0.94384", "share: 0.9"},
		"match":     {"match: exact", "match: regex"},
		"path":      {"path: /p/", "path: p/"},
		"rate":      {"transient: 0.02", "transient: 1.5"},
		"farm":      {"unscheduled: 0.078", "unscheduled: 1"},
		"backlog":   {"overdue: 0.33", "overdue: 0.995"},
		"duration":  {"depth: 12h", "depth: soon"},
		"no device": {"devices: [desktop, mobile]", "devices: []"},
	} {
		if _, err := ParseMix([]byte(strings.Replace(good, edit[0], edit[1], 1))); !errors.Is(err, ErrInvalidMix) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLadderStationary(t *testing.T) {
	pi := ladderStationary(4, 0.75)
	want := []float64{27.0 / 40, 9.0 / 40, 3.0 / 40, 1.0 / 40}
	for i := range pi {
		if math.Abs(pi[i]-want[i]) > 1e-12 {
			t.Fatalf("π = %v, want %v", pi, want)
		}
	}
	if pi := ladderStationary(4, 0); pi[3] != 1 {
		t.Fatalf("never visited: %v", pi)
	}
	if pi := ladderStationary(4, 1); pi[0] != 1 {
		t.Fatalf("always visited: %v", pi)
	}
}

func generate(t testing.TB, keys int, seed uint64) *Corpus {
	t.Helper()
	c, err := Generate(DefaultMix(), keys, seed, testStart, config.Default())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGenerateFollowsTheMix(t *testing.T) {
	const n = 40_000
	c := generate(t, n, 3)
	if c.Len() != n {
		t.Fatalf("%d keys, want %d", c.Len(), n)
	}
	cfg := config.Default()
	pol, _, err := policyFor(cfg, c.Mix, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	disc, overdue, never := 0, 0, 0
	rungs := map[int64]int{}
	for i := range n {
		k := string(c.Keys[i])
		if seen[k] {
			t.Fatalf("duplicate key %q", k)
		}
		seen[k] = true
		// Every key falls under its own class's route, as the policy matches it.
		if route, _ := pol.RouteOf(c.Keys[i]); route != c.Mix.Classes[c.Class[i]].Name {
			t.Fatalf("%q is class %s but matches route %q", k, c.Mix.Classes[c.Class[i]].Name, route)
		}
		if !c.Submitted[i] {
			disc++
		}
		if c.LastOKMs[i] < 0 {
			never++
		} else if c.DueMs[i] <= testStart {
			overdue++
			if testStart-c.DueMs[i] > c.Mix.Backlog.Depth.Ms() {
				t.Fatalf("%q overdue by more than the backlog's depth", k)
			}
		} else if c.DueMs[i]-testStart > c.CadenceMs[i]+1 {
			t.Fatalf("%q due more than one cadence ahead", k)
		}
		if c.LastOKMs[i] >= 0 && c.DueMs[i]-c.LastOKMs[i] != c.CadenceMs[i] {
			t.Fatalf("%q: due is not one cadence after its last render", k)
		}
		if c.Mix.Classes[c.Class[i]].Name == "catalog" {
			rungs[c.CadenceMs[i]]++
		}
	}
	near := func(got int, share, tol float64) bool { return math.Abs(float64(got)/n-share) <= tol }
	if !near(disc, 0.459, 0.01) || !near(overdue, 0.33, 0.01) || !near(never, 0.01, 0.003) {
		t.Fatalf("discovered %d, overdue %d, never rendered %d of %d", disc, overdue, never, n)
	}
	if c.ClassPages[0] != 2 || c.ClassPages[1] != 2244 || c.ClassPages[2] != 37_754 {
		t.Fatalf("class pages %v", c.ClassPages)
	}
	// Catalog pages sit on the ladder at its long-run shares: at visit 0.5 a quarter on each
	// rung, so 6 h 25 %, 12 h 25 % and 24 h 50 % (the 48 h rung clamped to the 24 h ceiling).
	cat := float64(c.ClassPages[1])
	if math.Abs(float64(rungs[6*3_600_000])/cat-0.25) > 0.02 || math.Abs(float64(rungs[24*3_600_000])/cat-0.5) > 0.02 {
		t.Fatalf("catalog rungs %v", rungs)
	}
	// Their renders come 16.5 h apart on average, at a harmonic mean of 12 h.
	if math.Abs(c.ClassMeanCadenceMs[1]-16.5*3_600_000) > 1 || math.Abs(c.ClassHarmonicCadenceMs[1]-12*3_600_000) > 1 {
		t.Fatalf("catalog cadence: mean %.0f ms, harmonic %.0f ms", c.ClassMeanCadenceMs[1], c.ClassHarmonicCadenceMs[1])
	}
	// Demand: home 2/h, catalog 2244 / 16.5 h, product 37754 / 48 h, less the gone and noindex.
	want := (2 + 2244/16.5 + 37754/48.0) * (1 - 0.01)
	if math.Abs(c.DemandPerHour-want)/want > 0.01 {
		t.Fatalf("demand %.1f/h, want ≈ %.1f/h", c.DemandPerHour, want)
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	a, b, other := generate(t, 5000, 9), generate(t, 5000, 9), generate(t, 5000, 10)
	if !slices.EqualFunc(a.Keys, b.Keys, func(x, y []byte) bool { return string(x) == string(y) }) ||
		!slices.Equal(a.DueMs, b.DueMs) || !slices.Equal(a.Submitted, b.Submitted) || !slices.Equal(a.Fate, b.Fate) ||
		!slices.Equal(a.CadenceMs, b.CadenceMs) || a.DemandPerHour != b.DemandPerHour {
		t.Fatal("the same seed gave two corpora")
	}
	if slices.Equal(a.DueMs, other.DueMs) {
		t.Fatal("another seed gave the same due times")
	}
}
