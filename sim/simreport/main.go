// Command simreport runs the simulator's standard scenarios (every policy at 100 %, 75 % and
// 50 % of demand) and writes the scheduling-quality report, docs/SIMULATION.md, with its
// charts. `make sim` runs it; the report records the exact command line and seed, so anyone can
// reproduce it byte for byte.
//
//	go run ./sim/simreport -out docs/SIMULATION.md -charts docs/sim -keys 200000 -seed 1
//
// Progress and the wall time go to stderr, never into the report: the report is a deterministic
// function of the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/sim"
)

func main() {
	// The simulator allocates steadily (every sweep builds a selection and a published set) over
	// a live heap of a few hundred MB; collecting less often saves a tenth of the run. The limit
	// keeps the heap from growing past what a shared build machine can spare.
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(2 << 30)
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "simreport:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		out        = flag.String("out", "docs/SIMULATION.md", "the report to write; - for the table alone on stdout")
		charts     = flag.String("charts", "docs/sim", "directory for the SVG charts (empty: none)")
		keys       = flag.Int("keys", 200_000, "corpus size (0: the mix's own)")
		seed       = flag.Uint64("seed", 1, "the seed every random decision derives from")
		mixPath    = flag.String("mix", "", "corpus mix file (default: the built-in sim/default-mix.yaml)")
		cfgPath    = flag.String("config", "", "freshq configuration file (default: the defaults); its routes are replaced by the mix's")
		sweepEvery = flag.Duration("sweep-interval", 0, "override queue.ready.sweep_interval (0: the configuration's)")
		warmup     = flag.Duration("warmup", 144*time.Hour, "simulated time before measuring")
		window     = flag.Duration("window", 96*time.Hour, "simulated time measured")
		coarse     = flag.Duration("warmup-sweep-interval", 0, "sweep interval for the warm-up until -settle before the window (0: the configured one throughout)")
		settle     = flag.Duration("settle", 48*time.Hour, "how long before the window the sweep returns to its configured interval")
		parallel   = flag.Int("parallel", runtime.NumCPU(), "scenarios run at once (results do not depend on it)")
		policies   = flag.String("policies", "", "comma-separated policy names to run (default: all)")
		capacities = flag.String("capacities", "", "comma-separated capacities, e.g. 1,0.5 (default: 1,0.75,0.5)")
		bigHost    = flag.String("bighost", "big.test", "the politeness scenario's big host (empty: no such scenario)")
		bigShare   = flag.Float64("bighost-share", 0.9, "the share of the due rows the big host holds")
		bigLimit   = flag.Int("bighost-limit", 2, "the big host's renders in flight at most (render.hosts.overrides)")
		bigPolicy  = flag.String("bighost-policy", "ready+lanes", "the policy the politeness scenario runs")
		bigCap     = flag.Float64("bighost-capacity", 1, "the politeness scenario's capacity, a share of the other hosts' demand")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}

	mix, mixName := sim.DefaultMix(), "[`sim/default-mix.yaml`](../sim/default-mix.yaml)"
	if *mixPath != "" {
		m, err := sim.LoadMix(*mixPath)
		if err != nil {
			return err
		}
		mix, mixName = m, "`"+*mixPath+"`"
	}
	cfg := config.Default()
	if *cfgPath != "" {
		c, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		cfg = c
	}
	if *sweepEvery > 0 {
		cfg.Queue.Ready.SweepInterval = config.Duration(*sweepEvery)
	}
	if *keys == 0 {
		*keys = mix.Keys
	}
	scs, err := scenarios(*policies, *capacities)
	if err != nil {
		return err
	}
	opts, err := sim.Options{Config: cfg, Warmup: *warmup, Window: *window,
		CoarseSweepEvery: *coarse, Settle: *settle}.WithDefaults()
	if err != nil {
		return err
	}
	const startMs = 1_800_000_000_000 // 2027-01-15T08:00:00Z: any fixed instant does
	corpus, err := sim.Generate(mix, *keys, *seed, startMs, cfg)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	began := time.Now()
	done := 0
	var mu sync.Mutex
	opts.OnDone = func(r *sim.Result) {
		mu.Lock()
		defer mu.Unlock()
		done++
		fmt.Fprintf(os.Stderr, "simreport: %2d/%d %-11s at %3.0f %% done after %s\n", done, len(scs),
			r.Scenario.Name, 100*r.Scenario.Capacity, time.Since(began).Round(time.Second))
	}
	fmt.Fprintf(os.Stderr, "simreport: %d scenarios, %d keys, %d at a time, %s warm-up + %s window\n",
		len(scs), corpus.Len(), *parallel, *warmup, *window)
	// The politeness scenario runs beside the standard ones: its two runs are sequential.
	var (
		big    *sim.BigHostResult
		bigErr error
		bigWG  sync.WaitGroup
	)
	if *bigHost != "" {
		b, err := bigHostScenario(*bigHost, *bigShare, *bigLimit, *bigPolicy, *bigCap)
		if err != nil {
			return err
		}
		bigWG.Go(func() {
			big, bigErr = sim.RunBigHost(ctx, corpus, opts, b)
			if bigErr == nil {
				fmt.Fprintf(os.Stderr, "simreport: politeness scenario done after %s\n", time.Since(began).Round(time.Second))
			}
		})
	}
	results, err := sim.RunAll(ctx, corpus, opts, scs, *parallel)
	bigWG.Wait()
	if err != nil {
		return err
	}
	if bigErr != nil {
		return bigErr
	}
	rep := &sim.Report{Command: "go run ./sim/simreport " + strings.Join(os.Args[1:], " "), Seed: *seed,
		MixName: mixName, Corpus: corpus, Options: opts, Results: results, BigHost: big}
	if *out == "-" {
		fmt.Print(rep.Table())
	} else {
		if *charts != "" {
			link, err := filepath.Rel(filepath.Dir(*out), *charts)
			if err != nil {
				return err
			}
			if rep.Charts, err = sim.WriteCharts(*charts, filepath.ToSlash(link), results, mix); err != nil {
				return err
			}
		}
		if err := os.WriteFile(*out, rep.Markdown(), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	fmt.Fprintf(os.Stderr, "simreport: done in %s\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// scenarios selects the standard scenarios named by the flags.
func scenarios(policies, capacities string) ([]sim.Scenario, error) {
	var names []string
	if policies != "" {
		names = strings.Split(policies, ",")
	}
	var caps []float64
	if capacities != "" {
		for _, s := range strings.Split(capacities, ",") {
			var c float64
			if _, err := fmt.Sscan(s, &c); err != nil || !(c > 0) {
				return nil, fmt.Errorf("capacity %q: want a positive share such as 0.75", s)
			}
			caps = append(caps, c)
		}
	} else {
		caps = sim.Capacities()
	}
	var out []sim.Scenario
	for _, c := range caps {
		for _, p := range sim.Policies() {
			if names != nil && !slices.Contains(names, p.Name) {
				continue
			}
			p.Capacity = c
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no scenario matches -policies and -capacities")
	}
	return out, nil
}

// bigHostScenario is the politeness scenario the flags describe.
func bigHostScenario(host string, share float64, limit int, policy string, capacity float64) (sim.BigHost, error) {
	for _, p := range sim.Policies() {
		if p.Name == policy {
			p.Capacity = capacity
			return sim.BigHost{Host: host, DueShare: share, Limit: limit, Scenario: p, SameFarm: true}, nil
		}
	}
	return sim.BigHost{}, fmt.Errorf("-bighost-policy %q: not a policy", policy)
}
