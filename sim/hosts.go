package sim

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/freshq/freshq/config"
)

// BigHost is the politeness scenario: one host holds most of the due rows and may have only a
// few renders in flight (render.hosts.overrides); every other host must be served as if it
// were not there, and the big host must never have more renders in flight than its limit.
//
// The scenario runs the corpus twice under the same policy, configuration and farm for the
// other hosts: without the big host, then with its pages added. A farm whose renders take L
// on average can start at most Limit ÷ L renders an hour of a host held to Limit in flight, so
// the second run's farm is the first's plus that many renders an hour: Limit slots added for
// the host that may use them. If the limit holds and the big host's rows clog neither the
// ready set nor the claim path, the other hosts are offered at least what they had without
// it, and their lateness stays where it was.
type BigHost struct {
	Host     string   // the big host's name, e.g. "big.test"
	DueShare float64  // the share of all due rows its pages are sized to hold, e.g. 0.9
	Limit    int      // its render.hosts.overrides entry: renders in flight at most
	Scenario Scenario // the policy, and the capacity as a share of the other hosts' demand
	// SameFarm also runs the corpus with the big host on the first run's farm, without the
	// slots added for it: what the renders it takes within its limit cost the others when
	// nobody adds them (not a promise: they are the farm's). Result.SameFarm holds it.
	SameFarm bool
}

// BigHostResult is what the scenario measured.
type BigHostResult struct {
	BigHost
	// Keys is how many pages of the big host were added, all overdue at the start.
	Keys int
	// AddedPerHour is the renders an hour added to the farm for the big host: Limit ÷ the
	// mean render latency. Slots is the farm's render slots as the sweep is told them
	// (render.concurrency × the render workers): its mean renders in flight, rounded up.
	AddedPerHour float64
	Slots        int
	// Sizings counts the runs with the big host: a run whose big host held less than
	// DueShare of the due rows is sized again from what it measured (at most 3 runs).
	Sizings int
	// Without and With are the two runs; SameFarm, if BigHost.SameFarm, is With's corpus on
	// Without's farm.
	Without, With, SameFarm *Result
}

// sizings bounds the runs RunBigHost makes with the big host.
const sizings = 3

// Tolerance is how much later than without the big host another host may be rendered: the
// issue's 10 %.
const Tolerance = 0.10

// RunBigHost runs the politeness scenario b over corpus c.
func RunBigHost(ctx context.Context, c *Corpus, o Options, b BigHost) (*BigHostResult, error) {
	opts, err := o.WithDefaults()
	if err != nil {
		return nil, err
	}
	switch {
	case b.Host == "" || c.HostIndex(b.Host) >= 0:
		return nil, fmt.Errorf("sim: big host: %q is not a new host of the corpus", b.Host)
	case !(b.DueShare > 0 && b.DueShare < 1):
		return nil, fmt.Errorf("sim: big host: the due share must be in (0, 1), got %v", b.DueShare)
	case b.Limit < 1:
		return nil, fmt.Errorf("sim: big host: the limit must be positive, got %d", b.Limit)
	case !(b.Scenario.Capacity > 0):
		return nil, fmt.Errorf("sim: big host: the capacity must be positive, got %v", b.Scenario.Capacity)
	}
	res := &BigHostResult{BigHost: b}
	base := b.Scenario.Capacity * c.DemandPerHour
	lat := meanLatencyMs(c.Mix)
	res.AddedPerHour = float64(b.Limit) * 3_600_000 / lat
	farm := base + res.AddedPerHour
	res.Slots = max(1, int(math.Ceil(farm*lat/3_600_000)))

	cfg := *opts.Config
	cfg.Workers = 2 // worker 0 and one render worker holding every slot of the farm
	cfg.Render.Concurrency = res.Slots
	cfg.Render.Hosts.Overrides = maps.Clone(cfg.Render.Hosts.Overrides)
	if cfg.Render.Hosts.Overrides == nil {
		cfg.Render.Hosts.Overrides = map[string]int{}
	}
	cfg.Render.Hosts.Overrides[b.Host] = b.Limit
	opts.Config = &cfg

	sc := b.Scenario
	sc.PerHour = base
	if res.Without, err = Run(ctx, c, opts, sc); err != nil {
		return nil, err
	}
	// Size the big host: its due rows are DueShare of all, so DueShare ÷ (1 − DueShare) times
	// the others' (as the first run measured them); and every page it renders is not due for
	// a cadence, so it needs as many more as it can render in one, at most Limit ÷ latency an
	// hour. The big host changes how late the others are, and so their due rows: a run that
	// falls short of DueShare is sized again from what it measured, at most sizings times.
	// Each sizing aims a quarter of the way from DueShare to 1, so that a run does not fall
	// short by the little the others' due rows move between two runs.
	aim := b.DueShare + (1-b.DueShare)/4
	others := 0.0
	for _, h := range res.Without.Hosts {
		others += h.MeanDue
	}
	ci := bulkClass(c.Mix)
	res.Keys = int(math.Ceil(aim/(1-aim)*others +
		res.AddedPerHour*c.ClassMeanCadenceMs[ci]/3_600_000))
	sc.PerHour = farm
	var big *Corpus
	for {
		if big, err = c.WithHost(&cfg, b.Host, ci, res.Keys); err != nil {
			return nil, err
		}
		if res.With, err = Run(ctx, big, opts, sc); err != nil {
			return nil, err
		}
		res.Sizings++
		bh := res.Big()
		if bh.DueShare >= b.DueShare || res.Sizings == sizings {
			break
		}
		others = 0
		for _, h := range res.With.Hosts {
			if h.Name != b.Host {
				others += h.MeanDue
			}
		}
		notDue := float64(res.Keys) - bh.MeanDue
		res.Keys = int(math.Ceil(aim/(1-aim)*others + notDue))
	}
	if b.SameFarm {
		sc.PerHour = base
		if res.SameFarm, err = Run(ctx, big, opts, sc); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// Big returns the big host's figures in the run with it.
func (b *BigHostResult) Big() HostResult { return hostNamed(b.With, b.Host) }

// Violations lists what breaks the scenario's promises, empty when they hold: the big host
// had more than Limit renders in flight, held less than DueShare of the due rows, or another
// host's mean lateness was more than Tolerance above its figure without the big host.
func (b *BigHostResult) Violations() []string {
	var out []string
	big := b.Big()
	if big.MaxInFlight > b.Limit {
		out = append(out, fmt.Sprintf("%s had %d renders in flight, above its limit %d", b.Host, big.MaxInFlight, b.Limit))
	}
	if big.DueShare < b.DueShare {
		out = append(out, fmt.Sprintf("%s held %.1f %% of the due rows, not %.0f %%", b.Host, 100*big.DueShare, 100*b.DueShare))
	}
	for _, w := range b.Without.Hosts {
		h := hostNamed(b.With, w.Name)
		if w.Ratios == 0 || h.Ratios == 0 {
			out = append(out, fmt.Sprintf("%s: no lateness to compare (%d renders without, %d with)", w.Name, w.Ratios, h.Ratios))
			continue
		}
		if h.Mean > (1+Tolerance)*w.Mean {
			out = append(out, fmt.Sprintf("%s: mean lateness %.2f× with %s against %.2f× without (+%.1f %%)",
				w.Name, h.Mean, b.Host, w.Mean, 100*(h.Mean/w.Mean-1)))
		}
	}
	return out
}

// hostNamed returns r's figures for host name (zero if it has none).
func hostNamed(r *Result, name string) HostResult {
	for _, h := range r.Hosts {
		if h.Name == name {
			return h
		}
	}
	return HostResult{Name: name}
}

// meanLatencyMs is the mean of the mix's log-normal render latency: median × e^(σ²/2).
func meanLatencyMs(m *Mix) float64 {
	return max(1, float64(m.Render.LatencyMedian.Ms())*math.Exp(m.Render.LatencySigma*m.Render.LatencySigma/2))
}

// bulkClass is the prefix-route class with the largest share of keys: the big host's pages
// are of it, as a shop's product pages are.
func bulkClass(m *Mix) int {
	best := -1
	for i, cl := range m.Classes {
		if cl.Route.Match == "prefix" && (best < 0 || cl.Share > m.Classes[best].Share) {
			best = i
		}
	}
	return best
}

// WithHost returns a copy of c with n more pages of class ci (a prefix route) on host, every
// one overdue at the start (a host with a backlog), drawn from the seed as any page is. c is
// left as it was.
func (c *Corpus) WithHost(cfg *config.Config, host string, ci, n int) (*Corpus, error) {
	if ci < 0 || ci >= len(c.Mix.Classes) || c.Mix.Classes[ci].Route.Match != "prefix" {
		return nil, fmt.Errorf("sim: with host: class %d is not a prefix route of the mix", ci)
	}
	if n < 1 {
		return nil, fmt.Errorf("sim: with host: %d pages", n)
	}
	pol, _, err := policyFor(cfg, c.Mix, 0)
	if err != nil {
		return nil, err
	}
	out := &Corpus{Mix: c.Mix, Seed: c.Seed, Start: c.Start,
		Keys: slices.Clone(c.Keys), Class: slices.Clone(c.Class), Submitted: slices.Clone(c.Submitted),
		Rung: slices.Clone(c.Rung), CadenceMs: slices.Clone(c.CadenceMs), DueMs: slices.Clone(c.DueMs),
		LastOKMs: slices.Clone(c.LastOKMs), Fate: slices.Clone(c.Fate),
		DemandPerHour: c.DemandPerHour, ClassDemand: slices.Clone(c.ClassDemand), ClassPages: slices.Clone(c.ClassPages),
		ClassMeanCadenceMs:     slices.Clone(c.ClassMeanCadenceMs),
		ClassHarmonicCadenceMs: slices.Clone(c.ClassHarmonicCadenceMs),
	}
	cl, devs := c.Mix.Classes[ci], c.Mix.Devices
	key := func(j int) []byte {
		return fmt.Appendf(nil, "%s|https://%s%s%d", devs[j%len(devs)], host, cl.Route.Path, j/len(devs))
	}
	g := out.classGen(pol, cfg.Render.Demand.Ladder, ci, key(0))
	before := out.ClassDemand[ci]
	for j := range n {
		g.add(key(j), true)
	}
	out.DemandPerHour += out.ClassDemand[ci] - before
	if err := out.indexHosts(); err != nil {
		return nil, err
	}
	return out, nil
}
