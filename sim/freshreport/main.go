// Command freshreport runs the simulator's freshness comparison (make sim-freshness): on the
// default corpus mix with ground truth — every page's hidden change process and its requests —
// it runs index order, ready (production's policy), freshness (learning online from its own
// renders and the simulated requests) and the oracle (the optimal rates for the true change
// and request rates) at each capacity, on the standard truth and on a held-out one drawn with
// another seed and other distributions, and writes one JSON list of rows
// {"mix", "capacity", "policy", "stale_request_share", ...} (sim.FreshRow).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/sim"
)

func main() {
	// As simreport: the runs allocate steadily over a small live heap, and collecting less
	// often saves a tenth of the run; the limit keeps the heap within what a shared machine
	// can spare.
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(1 << 30)
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "freshreport:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		out        = flag.String("out", "-", "the JSON file to write; - for stdout")
		keys       = flag.Int("keys", 20_000, "corpus size")
		seed       = flag.Uint64("seed", 1, "the standard mix's seed; the held-out mix's corpus and truth use others derived from it")
		warmup     = flag.Duration("warmup", 240*time.Hour, "simulated time before measuring: long enough for a few renders of a 48 h page at 25 %")
		window     = flag.Duration("window", 96*time.Hour, "simulated time measured")
		sweepEvery = flag.Duration("sweep-interval", time.Hour, "queue.ready.sweep_interval")
		coarse     = flag.Duration("warmup-sweep-interval", 4*time.Hour, "sweep interval for the warm-up until -settle before the window")
		settle     = flag.Duration("settle", 48*time.Hour, "how long before the window the sweep returns to -sweep-interval")
		claimEvery = flag.Duration("claim-interval", 5*time.Second, "how often the farm claims what its capacity allows (the simulator's default; a longer one offers more slots at once than a host's limit takes, and loses them)")
		capacities = flag.String("capacities", "0.25,0.5,1", "comma-separated capacities, shares of demand")
		minDiv     = flag.Float64("min-interval-divisor", 16, "each route's min_interval is its interval ÷ this")
		tau        = flag.Duration("request-tau", 72*time.Hour, "the request counters' time constant")
		prior      = flag.Float64("prior-weight", 1, "the change-rate prior's weight, in pseudo-renders")
		parallel   = flag.Int("parallel", runtime.NumCPU(), "runs at once (results do not depend on it)")
		sites      = flag.Int("sites", 48, "the corpus's sites at least (hosts): production's full corpus has 48; the mix alone gives one below 33,000 keys, and then the sweep's per-host cap and spread, not the score, decide the order of the set")
		md         = flag.String("md", "", "also write the rows as the markdown table docs/SIMULATION.md quotes (empty: no)")
		cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the run to this file (empty: no)")
		report     = flag.String("report", "", "the report (docs/SIMULATION.md) whose freshness section to write, replacing the one it has or appended (empty: none)")
		charts     = flag.String("charts", "", "with -report, the directory for the chart's PNG (empty: no chart)")
		fromRows   = flag.String("rows", "", "run nothing: take the rows from this JSON file of an earlier run (its -out) and write -md and -report from them; give the run's own flags, which the report records")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	var caps []float64
	for _, f := range strings.Split(*capacities, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) {
			return fmt.Errorf("-capacities: %q is not a positive number", f)
		}
		caps = append(caps, v)
	}
	if *fromRows != "" {
		b, err := os.ReadFile(*fromRows)
		if err != nil {
			return err
		}
		var rows []sim.FreshRow
		if err := json.Unmarshal(b, &rows); err != nil {
			return fmt.Errorf("-rows %s: %w", *fromRows, err)
		}
		return write(rows, *md, *report, *charts)
	}
	cfg := config.Default()
	cfg.Queue.Ready.SweepInterval = config.Duration(*sweepEvery)
	opts, err := sim.Options{Config: cfg, Warmup: *warmup, Window: *window, ClaimEvery: *claimEvery,
		CoarseSweepEvery: *coarse, Settle: *settle}.WithDefaults()
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	began := time.Now()
	opts.OnDone = func(r *sim.Result) {
		fmt.Fprintf(os.Stderr, "freshreport: %-8s %-9s at %3.0f %% done after %s\n", r.Fresh.Mix, r.Scenario.Name, 100*r.Scenario.Capacity,
			time.Since(began).Round(time.Second))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	const startMs = 1_800_000_000_000 // as simreport's
	mixes := []struct {
		corpusSeed uint64
		truth      sim.TruthMix
	}{
		{*seed, sim.StandardTruth(*seed + 100)},
		{*seed + 1, sim.HeldOutTruth(*seed + 200)},
	}
	var runs []sim.FreshMix
	for _, m := range mixes {
		mix := sim.DefaultMix()
		mix.Sites = *sites
		corpus, err := sim.Generate(mix, *keys, m.corpusSeed, startMs, cfg)
		if err != nil {
			return err
		}
		truth, err := sim.NewTruth(corpus, m.truth)
		if err != nil {
			return err
		}
		runs = append(runs, sim.FreshMix{Corpus: corpus,
			Fresh: sim.FreshOptions{Truth: truth, MinIntervalDivisor: *minDiv, RequestTau: *tau, PriorWeight: *prior}})
	}
	rows, err := sim.RunFreshnessMixes(ctx, runs, opts, caps, *parallel)
	if err != nil {
		return err
	}
	for _, r := range rows {
		fmt.Fprintf(os.Stderr, "freshreport: %-8s %4.0f %% %-9s stale %.4f  age÷cadence %.2f\n",
			r.Mix, 100*r.Capacity, r.Policy, r.StaleShare, r.AgeOverCadence)
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	fmt.Fprintf(os.Stderr, "freshreport: %d keys, %d rows in %s\n", *keys, len(rows), time.Since(began).Round(time.Second))
	if err := write(rows, *md, *report, *charts); err != nil {
		return err
	}
	if *out == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}

// write writes the rows' markdown table to md and their section of the report (with its chart
// into charts), each unless empty.
func write(rows []sim.FreshRow, md, report, charts string) error {
	if md != "" {
		if err := os.WriteFile(md, []byte(sim.FreshTable(rows)), 0o644); err != nil {
			return err
		}
	}
	if report != "" {
		return writeReport(report, charts, rows)
	}
	return nil
}

// writeReport writes the freshness section of the report at path, and its chart into charts.
// The command it records leaves out -out, -md, -report, -charts, -cpuprofile, -parallel and
// -rows, which change nothing in the rows.
func writeReport(path, charts string, rows []sim.FreshRow) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var chart *sim.Chart
	if charts != "" {
		link, err := filepath.Rel(filepath.Dir(path), charts)
		if err != nil {
			return err
		}
		c, err := sim.WriteFreshChart(charts, filepath.ToSlash(link), rows)
		if err != nil {
			return err
		}
		chart = &c
	}
	args := []string{"go run ./sim/freshreport"}
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "out", "md", "report", "charts", "cpuprofile", "parallel", "rows":
		default:
			args = append(args, "-"+f.Name+" "+f.Value.String())
		}
	})
	section := sim.FreshSection(rows, strings.Join(args, " "), chart)
	return os.WriteFile(path, []byte(sim.SpliceFreshSection(string(old), section)), 0o644)
}
