package sim

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/freshq/freshq/config"
)

// TestTableGolden compares the report's headline table (Report.Table, the text `make sim`
// prints, not the charts) for a small corpus with testdata/table-small.txt. The simulator is
// deterministic, so any change to a decision the production code makes under scarcity — a
// score, a tie-break, a lane share, a backoff, the claim path — moves some figure of it; the
// other sim tests compare policies with each other, this one compares a run with a reference.
// `go test ./sim -run TestTableGolden -rewrite` records the table as the code makes it now.
//
// Directive:
//
//	table keys=N seed=S warmup=D window=D settle=D coarse=D sweep=D claim=D capacities=(c,…)
//
// runs every standard policy at each capacity (coarse is the warm-up's sweep interval until
// settle before the window, sweep the configured one, claim the farm's claim period) and prints
// the table. The sizes are chosen to run in a few seconds under -race.
func TestTableGolden(t *testing.T) {
	datadriven.RunTest(t, "testdata/table-small.txt", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "table" {
			d.Fatalf(t, "unknown directive %q", d.Cmd)
		}
		var keys int
		var seed uint64
		d.ScanArgs(t, "keys", &keys)
		d.ScanArgs(t, "seed", &seed)
		dur := func(key string) time.Duration {
			var s string
			d.ScanArgs(t, key, &s)
			v, err := time.ParseDuration(s)
			if err != nil {
				d.Fatalf(t, "%s: %v", key, err)
			}
			return v
		}
		cfg := config.Default()
		cfg.Queue.Ready.SweepInterval = config.Duration(dur("sweep"))
		opts, err := Options{Config: cfg, Warmup: dur("warmup"), Window: dur("window"), Settle: dur("settle"),
			CoarseSweepEvery: dur("coarse"), ClaimEvery: dur("claim")}.WithDefaults()
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		arg, ok := d.Arg("capacities")
		if !ok {
			d.Fatalf(t, "missing capacities")
		}
		var scs []Scenario
		for _, v := range arg.Vals {
			c, err := strconv.ParseFloat(v, 64)
			if err != nil {
				d.Fatalf(t, "capacities: %v", err)
			}
			for _, p := range Policies() {
				p.Capacity = c
				scs = append(scs, p)
			}
		}
		c, err := Generate(DefaultMix(), keys, seed, testStart, cfg)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		results, err := RunAll(context.Background(), c, opts, scs, 2)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		rep := &Report{Seed: seed, Corpus: c, Options: opts, Results: results}
		return rep.Table()
	})
}
