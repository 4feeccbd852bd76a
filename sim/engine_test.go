package sim

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/internal/invariants"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/policy"
)

// The tests run a small corpus — a few thousand keys, a sweep every 5 minutes (every 15 until
// a day before the window), three days of warm-up and three measured; fewer keys and two days
// of warm-up under the race detector, which slows the shm atomics more than tenfold — so that
// the package runs in about a minute with -race. The window stays three days in both: at half
// capacity a discovered product page waits about two of its 48 h cadences, and a shorter
// window would count pages as never granted that are merely waiting their turn. The
// qualitative results hold at this size; the report's figures come from `make sim`.
var (
	testKeys   = 2500
	testWarmup = 72 * time.Hour
	testWindow = 72 * time.Hour
)

func init() {
	if invariants.Race {
		testKeys, testWarmup = 1500, 48*time.Hour
	}
}

func testOptions() Options {
	cfg := config.Default()
	cfg.Queue.Ready.SweepInterval = config.Duration(5 * time.Minute)
	return Options{Config: cfg, Warmup: testWarmup, Window: testWindow,
		CoarseSweepEvery: 15 * time.Minute, Settle: 24 * time.Hour}
}

var (
	corpusOnce sync.Once
	testCorpus *Corpus
)

func corpus(t testing.TB) *Corpus {
	corpusOnce.Do(func() {
		c, err := Generate(DefaultMix(), testKeys, 1, testStart, testOptions().Config)
		if err != nil {
			t.Fatal(err)
		}
		testCorpus = c
	})
	return testCorpus
}

// The scenarios the tests read, run once, two at a time.
var (
	resultsOnce sync.Once
	results     map[Scenario]*Result
	resultsErr  error
)

// testScenarios is every standard scenario: equal work is checked at every capacity.
func testScenarios() []Scenario { return StandardScenarios() }

// standardReport is the report of every standard scenario on the tests' corpus, from the runs
// runScenario keeps.
func standardReport(t testing.TB) *Report {
	t.Helper()
	var rs []*Result
	for _, sc := range testScenarios() {
		rs = append(rs, runScenario(t, sc))
	}
	return &Report{Corpus: corpus(t), Options: testOptions(), Results: rs}
}

func runScenario(t testing.TB, sc Scenario) *Result {
	t.Helper()
	resultsOnce.Do(func() {
		scs := testScenarios()
		rs, err := RunAll(context.Background(), corpus(t), testOptions(), scs, 2)
		results, resultsErr = map[Scenario]*Result{}, err
		for i, r := range rs {
			results[scs[i]] = r
		}
	})
	if resultsErr != nil {
		t.Fatal(resultsErr)
	}
	r, ok := results[sc]
	if !ok {
		t.Fatalf("scenario %+v is not among the tests' scenarios", sc)
	}
	return r
}

func scenario(name string, capacity float64) Scenario {
	for _, p := range Policies() {
		if p.Name == name {
			p.Capacity = capacity
			return p
		}
	}
	panic("no policy " + name)
}

func class(r *Result, name string) ClassResult {
	for _, c := range r.Classes {
		if c.Name == name {
			return c
		}
	}
	panic("no class " + name)
}

// TestEventLoopPacesCapacity: the farm is offered exactly the capacity's slots, gives exactly
// the mix's unscheduled share of them away, every other slot is either granted or idle, and
// renders complete after they start.
func TestEventLoopPacesCapacity(t *testing.T) {
	r := runScenario(t, scenario("ready b=1", 0.5))
	want := r.CapacityPerHour * testWindow.Hours()
	if math.Abs(float64(r.Offered)-want) > 1 {
		t.Fatalf("offered %d slots in the window, want %.1f", r.Offered, want)
	}
	if u := corpus(t).Mix.Render.Unscheduled * float64(r.Offered); r.Unscheduled == 0 || math.Abs(float64(r.Unscheduled)-u) > 1 {
		t.Fatalf("%d of %d slots unscheduled, want %.1f", r.Unscheduled, r.Offered, u)
	}
	if r.Renders+r.Idle+r.Unscheduled != r.Offered {
		t.Fatalf("renders %d + idle %d + unscheduled %d ≠ offered %d", r.Renders, r.Idle, r.Unscheduled, r.Offered)
	}
	if r.Idle != 0 {
		t.Fatalf("%d slots idle at half capacity: the backlog never empties", r.Idle)
	}
	done := 0
	for _, c := range r.Classes[:len(corpus(t).Mix.Classes)] {
		done += c.Renders
	}
	if done < r.Renders-200 || done > r.Renders+200 || r.OK+r.Transient+r.Deterministic != done {
		t.Fatalf("completed %d (ok %d, transient %d, sealed-cause %d) for %d started", done, r.OK, r.Transient, r.Deterministic, r.Renders)
	}
	// Transient failures reach the count at the mix's rate, within four standard deviations of
	// a binomial draw over the attempts completed (TestAttemptOutcomeRates checks the draw
	// itself over far more attempts).
	p := corpus(t).Mix.Render.Transient
	if rate, sd := float64(r.Transient)/float64(done), math.Sqrt(p*(1-p)/float64(done)); math.Abs(rate-p) > 4*sd {
		t.Fatalf("transient rate %.4f over %d attempts, want %.2f ± %.4f", rate, done, p, 4*sd)
	}
	o := testOptions()
	if want := int((testWarmup-o.Settle)/o.CoarseSweepEvery + (o.Settle+testWindow)/(5*time.Minute)); r.F1 != 0 || r.Sweeps != want {
		t.Fatalf("F1 %d, sweeps %d, want %d", r.F1, r.Sweeps, want)
	}
	if r.GrantsReady == 0 {
		t.Fatal("nothing was granted from the ready set")
	}
}

// TestAttemptOutcomeRates: an attempt's outcome is drawn at the mix's rates — transient
// failures per attempt, gone and noindex per page on every attempt — and is the same for the
// same page and attempt number whatever else happened.
func TestAttemptOutcomeRates(t *testing.T) {
	c := corpus(t)
	opts, err := testOptions().WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRun(c, opts, scenario("edf", 1))
	if err != nil {
		t.Fatal(err)
	}
	const perPage = 80
	n, transient := 0, 0
	for id := range int32(c.Len()) {
		for a := uint32(1); a <= perPage; a++ {
			_, out := r.attempt(id, a)
			if out2 := func() outcome.Outcome { _, o := r.attempt(id, a); return o }(); out2 != out {
				t.Fatalf("page %d attempt %d: %s, then %s", id, a, out, out2)
			}
			switch c.Fate[id] {
			case FateGone:
				if out != outcome.Gone && out != outcome.ServerError && out != outcome.Timeout {
					t.Fatalf("gone page %d answered %s", id, out)
				}
			case FateNoindex:
				if out != outcome.Noindex && out != outcome.ServerError && out != outcome.Timeout {
					t.Fatalf("noindex page %d answered %s", id, out)
				}
			}
			n++
			if out == outcome.ServerError {
				transient++
			}
		}
	}
	p := c.Mix.Render.Transient
	if rate, sd := float64(transient)/float64(n), math.Sqrt(p*(1-p)/float64(n)); math.Abs(rate-p) > 4*sd || 4*sd > 0.002 {
		t.Fatalf("transient rate %.4f over %d attempts, want %.2f ± %.4f", rate, n, p, 4*sd)
	}
}

// TestEventLoopStepByStep drives the loop through its first minutes and checks each piece of
// machinery did its part: a sweep published, claims leased from the ready set, completions
// refiled rows one cadence ahead and released their leases.
func TestEventLoopStepByStep(t *testing.T) {
	c := corpus(t)
	opts, err := testOptions().WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	opts.Warmup, opts.Window = 0, time.Hour
	r, err := newRun(c, opts, scenario("ready b=1", 1))
	if err != nil {
		t.Fatal(err)
	}
	r.end = c.Start + 10*60_000
	if err := r.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := r.seg.Ready().Stats(); st.Publishes != 2 || st.Taken == 0 {
		t.Fatalf("ready set after two sweeps: %+v", st)
	}
	if r.ds.Writes() == 0 || r.res.GrantsReady == 0 {
		t.Fatalf("writes %d, grants %d", r.ds.Writes(), r.res.GrantsReady)
	}
	// Every completed success is refiled one cadence after its completion.
	refiled := 0
	for i := range c.Len() {
		if r.lastOK[i] > c.Start {
			refiled++
			if due := r.ds.DueAt(int32(i)); due != r.lastOK[i]+r.lastCad[i] {
				t.Fatalf("%q rendered at %d with cadence %d is due at %d", c.Keys[i], r.lastOK[i], r.lastCad[i], due)
			}
		}
	}
	if refiled == 0 {
		t.Fatal("no render completed in ten minutes")
	}
	// Only the renders still in flight hold leases.
	if live := r.seg.Leases().Stats(r.nowMs + 1).Live; live != len(r.inflight) {
		t.Fatalf("%d live leases for %d renders in flight", live, len(r.inflight))
	}
}

// TestDeterminism: the same seed and scenarios give the same table, byte for byte, whatever
// the parallelism.
func TestDeterminism(t *testing.T) {
	opts := testOptions()
	opts.Warmup, opts.Window, opts.CoarseSweepEvery = 24*time.Hour, 24*time.Hour, 0
	gen := func(seed uint64) *Corpus {
		c, err := Generate(DefaultMix(), 1000, seed, testStart, opts.Config)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := gen(1)
	scs := []Scenario{scenario("edf", 0.75), scenario("ready+lanes", 0.75)}
	table := func(c *Corpus, scs []Scenario, parallel int) string {
		rs, err := RunAll(context.Background(), c, opts, scs, parallel)
		if err != nil {
			t.Fatal(err)
		}
		rep := &Report{Corpus: c, Results: rs}
		return rep.Table() + rep.Detail() + rep.Diagnostics()
	}
	a, b := table(c, scs, 2), table(gen(1), scs, 1)
	if a != b {
		t.Fatalf("two runs of the same seed differ:\n%s\n%s", a, b)
	}
	if table(gen(2), scs, 2) == a {
		t.Fatal("another seed gave the same table: the seed does not reach the run")
	}
}

// TestEDFReproducesTheFailure: index order makes every class wait about the same absolute
// time, so the 1 h class is several times later, relative to its cadence, than the 48 h class
// (production: 4.78× against 1.08× at 100 %, 48.83× against 2.00× at 50 %).
func TestEDFReproducesTheFailure(t *testing.T) {
	for _, capacity := range []float64{1, 0.5} {
		r := runScenario(t, scenario("edf", capacity))
		home, catalog, product := class(r, "home"), class(r, "catalog"), class(r, "product")
		t.Logf("edf at %g: home %.2f× over %d renders, catalog %.2f×, product %.2f×", capacity, home.Mean, home.Ratios, catalog.Mean, product.Mean)
		if home.Ratios == 0 || product.Ratios == 0 || home.Mean < 3*product.Mean {
			t.Errorf("edf at %g: home %.2f× is not several times product %.2f×", capacity, home.Mean, product.Mean)
		}
		// And it is index order's failure: one absolute lag behind every class. Home's figure
		// gives the lag (its route is exactly 1 h); the lag gives the others' figures, 1 + L/T
		// with T the harmonic mean of the cadences their renders set.
		lagH := home.Mean - 1
		c := corpus(t)
		for k, cr := range []ClassResult{catalog, product} {
			want := 1 + lagH*3_600_000/c.ClassHarmonicCadenceMs[k+1]
			if math.Abs(cr.Mean/want-1) > 0.15 {
				t.Errorf("edf at %g: home says %.1f h behind, so %s should be near %.2f×; it is %.2f×", capacity, lagH, cr.Name, want, cr.Mean)
			}
		}
		ready := runScenario(t, scenario("ready b=1", capacity))
		if rh := class(ready, "home"); rh.Mean >= home.Mean {
			t.Errorf("at %g ready holds home at %.2f×, no better than edf's %.2f×", capacity, rh.Mean, home.Mean)
		}
	}
}

// TestStrictStarvesDiscovered: strict lane priority never reaches the discovered lane at half
// capacity; the production lanes do.
func TestStrictStarvesDiscovered(t *testing.T) {
	strict := class(runScenario(t, scenario("strict", 0.5)), "discovered")
	if !starves(strict) || strict.Renders > strict.DueAtOpen/100 {
		t.Fatalf("strict at 50 %%: discovered %d of %d due pages never granted, %d renders", strict.Starved, strict.DueAtOpen, strict.Renders)
	}
	lanes := class(runScenario(t, scenario("ready+lanes", 0.5)), "discovered")
	if starves(lanes) || lanes.Renders < strict.DueAtOpen/2 {
		t.Fatalf("ready+lanes at 50 %%: discovered %d of %d never granted, %d renders", lanes.Starved, lanes.DueAtOpen, lanes.Renders)
	}
}

// TestEqualRenders: at every standard capacity the farm stays saturated — the unscheduled
// work keeps index order behind at 100 % as it kept production's — so every policy renders
// the same number of pages: what a policy changes is who, never how many.
func TestEqualRenders(t *testing.T) {
	var rs []*Result
	for _, sc := range StandardScenarios() {
		rs = append(rs, runScenario(t, sc))
	}
	rep := &Report{Corpus: corpus(t), Results: rs}
	lines, ok := rep.EqualRenders()
	if !ok {
		t.Fatalf("renders differ: %v", lines)
	}
	for _, r := range rs {
		first := runScenario(t, scenario("edf", r.Scenario.Capacity))
		if r.Renders != first.Renders || r.Idle != 0 || r.Unscheduled != first.Unscheduled {
			t.Fatalf("%s at %g: rendered %d (%d slots idle, %d unscheduled); edf %d (%d unscheduled)",
				r.Scenario.Name, r.Scenario.Capacity, r.Renders, r.Idle, r.Unscheduled, first.Renders, first.Unscheduled)
		}
	}
	// And the check bites: one more render than offered is extra work, and a policy that kept
	// the unscheduled slots for itself did more work than the others.
	extra := *rs[0]
	extra.Renders++
	if _, ok := (&Report{Corpus: corpus(t), Results: []*Result{&extra, rs[1]}}).EqualRenders(); ok {
		t.Fatal("the check accepted more renders than slots")
	}
	kept := *rs[0]
	kept.Renders, kept.Unscheduled = kept.Renders+kept.Unscheduled, 0
	if _, ok := (&Report{Corpus: corpus(t), Results: []*Result{&kept, rs[1]}}).EqualRenders(); ok {
		t.Fatal("the check accepted a policy that kept the unscheduled slots")
	}
}

// TestSaturationNeedsUnscheduledWork: without the unscheduled share, a farm at 100 % spends
// every slot on the cadences (but for the few attempts that fail), and because cadence counts
// from completion any lag lowers the demand below the capacity: index order drains to a
// fraction of the lag production showed and no longer shows its failure. The share, not the
// corpus alone, is what keeps production's farm saturated and behind.
func TestSaturationNeedsUnscheduledWork(t *testing.T) {
	mix := *corpus(t).Mix
	mix.Render.Unscheduled = 0
	c, err := Generate(&mix, testKeys, 1, testStart, testOptions().Config)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), c, testOptions(), scenario("edf", 1))
	if err != nil {
		t.Fatal(err)
	}
	home, product := class(r, "home"), class(r, "product")
	with := runScenario(t, scenario("edf", 1))
	t.Logf("edf at 100 %%: home %.2f× against product %.2f× without unscheduled work (%d of %d slots idle), %.2f× against %.2f× with it",
		home.Mean, product.Mean, r.Idle, r.Offered, class(with, "home").Mean, class(with, "product").Mean)
	if r.Unscheduled != 0 || home.Ratios == 0 || home.Mean >= 3*product.Mean {
		t.Fatalf("without unscheduled work edf at 100 %% still held home at %.2f× against product %.2f×", home.Mean, product.Mean)
	}
	// The lag home measures is the farm's standing lag: without the share it is a fraction of
	// what it is with it.
	if lag, lagWith := home.Mean-1, class(with, "home").Mean-1; !(lag < lagWith/2) {
		t.Fatalf("without unscheduled work home sits %.2f h behind, with it %.2f h", lag, lagWith)
	}
}

// TestModesReachTheSweep: each policy's selection mode is the one the sweep ran with (the
// scenarios differ, so the mode was not lost on the way).
func TestModesReachTheSweep(t *testing.T) {
	edf := runScenario(t, scenario("edf", 0.5))
	ready := runScenario(t, scenario("ready b=1", 0.5))
	if class(edf, "home").Mean == class(ready, "home").Mean {
		t.Fatal("edf and ready gave the same home lateness")
	}
	if scenario("ready+lanes", 1).Mode != policy.ModeLanes || scenario("strict", 1).Mode != policy.ModeStrict {
		t.Fatal("policy table")
	}
}

// TestSweepsReadByClass: the simulator drives the sweep's class merge, as worker 0's Badger
// store does, in every mode that ranks by score; edf iterates the whole due set.
func TestSweepsReadByClass(t *testing.T) {
	for _, name := range []string{"ready+lanes", "ready b=2", "strict", "edf"} {
		r := runScenario(t, scenario(name, 0.5))
		want := r.Sweeps
		if name == "edf" {
			want = 0
		}
		if r.Sweeps == 0 || r.ClassSweeps != want {
			t.Fatalf("%s: %d of %d sweeps read by class, want %d", name, r.ClassSweeps, r.Sweeps, want)
		}
	}
}
