package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/internal/invariants"
	"github.com/freshq/freshq/policy"
)

// TestBigHostScenario is the politeness scenario on a small corpus: 90 % of the due rows on one
// host limited to 2 renders in flight, the other hosts' mean lateness within 10 % of the same
// run without that host, and never more than 2 renders of the big host in flight.
//
// A small corpus asks for few renders an hour, so at the mix's 6 s per render the farm would
// hold a fraction of one render in flight and a limit of 2 would never bind. What the scenario
// is about is the ratio of the limit to the farm's slots, so the renders here take as long as
// makes the farm hold about a dozen (render.timeout and queue.lease_ttl grow with them): the
// limit then holds the big host to 2 of the farm's 14 slots, close to its 2 of 11 at `make sim`'s size.
func TestBigHostScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator twice")
	}
	mix := DefaultMix()
	mix.Sites = 4
	// Every sweep reads every due row, and the big host's are most of them: under the race
	// detector the corpus is smaller, the run shorter and the sweep less frequent.
	keys, opts := testKeys, testOptions()
	if invariants.Race {
		keys, opts.Warmup, opts.Window = 1000, 48*time.Hour, 48*time.Hour
		opts.CoarseSweepEvery = 30 * time.Minute
		opts.Config.Queue.Ready.SweepInterval = config.Duration(10 * time.Minute)
	}
	// The ready set scaled with the farm: at `make sim`'s size its 5,000 entries are about
	// ten sweeps' renders and a fiftieth of the due rows, so the big host could fill it many
	// times over; here as well.
	opts.Config.Queue.Ready.Capacity = 64
	c, err := Generate(mix, keys, 1, testStart, opts.Config)
	if err != nil {
		t.Fatal(err)
	}
	const slots = 12
	lat := slots * 3_600_000 / c.DemandPerHour / math.Exp(mix.Render.LatencySigma*mix.Render.LatencySigma/2)
	mix.Render.LatencyMedian = config.Duration(time.Duration(lat) * time.Millisecond)
	cfg := *opts.Config
	cfg.Render.Timeout = config.Duration(10 * time.Duration(lat) * time.Millisecond)
	cfg.Queue.LeaseTTL = 2 * cfg.Render.Timeout
	opts.Config = &cfg
	res, err := RunBigHost(context.Background(), c, opts, BigHost{Host: "big.test", DueShare: 0.9, Limit: 2,
		Scenario: Scenario{Name: "ready+lanes", Mode: policy.ModeLanes, Capacity: 1}})
	if err != nil {
		t.Fatal(err)
	}
	big := res.Big()
	t.Logf("big host: %d pages, %.1f %% of the due rows, %d renders, at most %d in flight; farm %d slots, +%.1f renders/h",
		res.Keys, 100*big.DueShare, big.Renders, big.MaxInFlight, res.Slots, res.AddedPerHour)
	t.Logf("refused for their host: %d takes and index rows; claims queued behind leases: %d", res.With.HostRefused, res.With.Queued)
	for _, w := range res.Without.Hosts {
		h := hostNamed(res.With, w.Name)
		t.Logf("%s: without %d renders %.3f× (p95 %.3f×), with %d renders %.3f× (p95 %.3f×), at most %d in flight",
			w.Name, w.Renders, w.Mean, w.P95, h.Renders, h.Mean, h.P95, h.MaxInFlight)
	}
	if big.Renders == 0 {
		t.Errorf("the big host rendered nothing: it is there to be throttled, not starved")
	}
	for _, v := range res.Violations() {
		t.Error(v)
	}
}
