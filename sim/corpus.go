package sim

import (
	"fmt"
	"github.com/freshq/freshq/assemble"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// Fate is what every render of a page answers, whatever the attempt: most pages render, a few
// are gone or noindex for good (policy seals them after its strikes).
type Fate uint8

// Fates.
const (
	FateOK      Fate = iota // renders (transient failures aside)
	FateGone                // 410 on every render
	FateNoindex             // noindex on every render
)

// Corpus is a generated corpus as it stands at Start: every page's key, class, source, demand
// rung, cadence, due time and last render. It is read-only once generated, so scenarios share
// it.
type Corpus struct {
	Mix   *Mix
	Seed  uint64
	Start int64 // ms: the virtual time the simulation starts at

	Keys      [][]byte
	Class     []uint8 // index into Mix.Classes
	Submitted []bool  // submitted by the site owner (sitemap or API) rather than discovered by a crawler
	Rung      []uint8 // demand-ladder rung, 1-based (policy.State.DemandRung)
	CadenceMs []int64 // the cadence carried on the row: the rung's, clamped to the route
	DueMs     []int64
	LastOKMs  []int64 // last successful render; -1 = never rendered (the cold lane)
	Fate      []Fate
	// Hosts are the corpus's hosts, sorted: each key's cachekey.Host, the unit render.hosts
	// limits. Host[i] is page i's index into Hosts.
	Hosts []string
	Host  []uint16

	// DemandPerHour is the renders per hour the cadences ask for: Σ 1/E[cadence] over the pages
	// that can render (FateOK), E over the page's long-run ladder distribution. Capacity c
	// means c × DemandPerHour renders per hour.
	DemandPerHour float64
	// ClassDemand is DemandPerHour by class; ClassPages counts each class's pages (all fates).
	ClassDemand []float64
	ClassPages  []int
	// ClassMeanCadenceMs is each class's long-run mean cadence (its ladder average): the mean
	// time between two renders of a page rendered on time.
	ClassMeanCadenceMs []float64
	// ClassHarmonicCadenceMs is 1 / E[1/cadence] over the class's renders. When every page
	// waits the same absolute lag L past its due time, as index order makes them, the class's
	// mean age ÷ TTL is 1 + L/this: it is the cadence production's figures can be compared with.
	ClassHarmonicCadenceMs []float64
}

// Len is the number of pages.
func (c *Corpus) Len() int { return len(c.Keys) }

// Draw purposes: each random decision about a page or an attempt draws from its own stream,
// so that changing one model does not reshuffle the others, and so that the n-th attempt of a
// page turns out the same under every policy (common random numbers: policies are compared on
// the same luck).
const (
	streamClass uint64 = iota + 1
	streamSource
	streamFate
	streamRung
	streamState
	streamDue
	streamLatency1
	streamLatency2
	streamTransient
	streamVisit
	streamFit // ProductionFit's rounding spread: no page, no seed
)

// mix64 is splitmix64's finalizer: a bijection that scatters nearby inputs.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// draw is a uniform [0, 1) that is a pure function of (seed, stream, a, b).
func draw(seed, stream, a, b uint64) float64 {
	x := mix64(seed ^ mix64(stream*0x9e3779b97f4a7c15^mix64(a+0x632be59bd9b4e019)^mix64(b+0x8cb92ba72f3d8dd7)))
	return float64(x>>11) / (1 << 53)
}

// Generate builds the corpus of keys pages from mix, starting at startMs, as decided by seed.
// cfg supplies the demand ladder and the clamping rules (through policy); its routes are
// replaced by the mix's.
func Generate(mix *Mix, keys int, seed uint64, startMs int64, cfg *config.Config) (*Corpus, error) {
	if err := mix.Validate(); err != nil {
		return nil, err
	}
	if keys < len(mix.Classes) {
		return nil, fmt.Errorf("sim: generate: %d keys cannot hold %d classes", keys, len(mix.Classes))
	}
	depthMs := mix.Backlog.Depth.Ms()
	if startMs < depthMs+1 {
		return nil, fmt.Errorf("sim: generate: start %d leaves no room for a backlog of %s", startMs, mix.Backlog.Depth)
	}
	pol, _, err := policyFor(cfg, mix, 0)
	if err != nil {
		return nil, err
	}
	ladder := cfg.Render.Demand.Ladder
	if len(ladder) == 0 || len(ladder) > math.MaxUint8 {
		return nil, fmt.Errorf("sim: generate: the demand ladder needs 1..255 rungs, has %d", len(ladder))
	}

	c := &Corpus{Mix: mix, Seed: seed, Start: startMs,
		Keys: make([][]byte, 0, keys), Class: make([]uint8, 0, keys), Submitted: make([]bool, 0, keys),
		Rung: make([]uint8, 0, keys), CadenceMs: make([]int64, 0, keys), DueMs: make([]int64, 0, keys),
		LastOKMs: make([]int64, 0, keys), Fate: make([]Fate, 0, keys),
		ClassDemand: make([]float64, len(mix.Classes)), ClassPages: make([]int, len(mix.Classes)),
		ClassMeanCadenceMs: make([]float64, len(mix.Classes)), ClassHarmonicCadenceMs: make([]float64, len(mix.Classes)),
	}
	counts := classCounts(mix, keys)
	devs := len(mix.Devices)
	sites := max(1, mix.Sites)
	for i, cl := range mix.Classes {
		if cl.Route.Match == "exact" {
			sites = max(sites, counts[i]/devs)
		}
	}
	for ci := range mix.Classes {
		g := c.classGen(pol, ladder, ci, classKey(mix, ci, 0, sites))
		for j := range counts[ci] {
			g.add(classKey(mix, ci, j, sites), false)
		}
		c.DemandPerHour += c.ClassDemand[ci]
	}
	if err := c.indexHosts(); err != nil {
		return nil, err
	}
	return c, nil
}

// pageGen adds pages of one class to a corpus: the class's rungs as policy sees them (the
// ladder's cadences clamped to the route) and how much of the time a page spends on each.
type pageGen struct {
	c       *Corpus
	ci      int
	cad     []int64
	pi      []float64
	mean    float64
	depthMs int64
}

// classGen computes class ci's rungs, records its mean and harmonic cadence, and returns the
// generator of its pages. sample is any key of the class: the routes only look at its path.
func (c *Corpus) classGen(pol *policy.Policy, ladder []config.Duration, ci int, sample []byte) *pageGen {
	cl := c.Mix.Classes[ci]
	g := &pageGen{c: c, ci: ci, cad: make([]int64, len(ladder)), depthMs: c.Mix.Backlog.Depth.Ms()}
	for r, d := range ladder {
		row := policy.Row{Key: sample, Row: store.Row{Projection: store.Projection{EffectiveIntervalMs: d.Ms()}}}
		g.cad[r], _ = pol.Cadence(&row)
	}
	g.pi = ladderStationary(len(ladder), cl.Visit)
	rate := 0.0
	for r := range g.pi {
		g.mean += g.pi[r] * float64(g.cad[r])
		rate += g.pi[r] / float64(g.cad[r])
	}
	c.ClassMeanCadenceMs[ci] = g.mean
	c.ClassHarmonicCadenceMs[ci] = 1 / rate
	return g
}

// add appends the page key, its fate, source, rung and starting state drawn from the seed and
// its index. overdue forces the backlog's overdue state (due up to the backlog's depth ago,
// rendered once before), whatever the draw.
func (g *pageGen) add(key []byte, overdue bool) {
	c, mix, seed, startMs := g.c, g.c.Mix, g.c.Seed, g.c.Start
	cl := mix.Classes[g.ci]
	id := uint64(len(c.Keys))
	fate := FateOK
	switch u := draw(seed, streamFate, id, 0); {
	case u < mix.Render.Gone:
		fate = FateGone
	case u < mix.Render.Gone+mix.Render.Noindex:
		fate = FateNoindex
	}
	rung := len(g.pi)
	acc, u := 0.0, draw(seed, streamRung, id, 0)
	for r := range g.pi {
		if acc += g.pi[r]; u < acc {
			rung = r + 1
			break
		}
	}
	cadence := g.cad[rung-1]
	var due, last int64
	u, v := draw(seed, streamState, id, 0), draw(seed, streamDue, id, 0)
	switch {
	case overdue:
		due = startMs - int64(v*float64(g.depthMs))
		last = due - cadence
	case u < mix.Backlog.NeverRendered:
		due, last = startMs-int64(v*float64(g.depthMs)), -1
	case u < mix.Backlog.NeverRendered+mix.Backlog.Overdue:
		due = startMs - int64(v*float64(g.depthMs))
		last = due - cadence
	default:
		due = startMs + 1 + int64(v*float64(cadence))
		last = due - cadence
	}
	c.Keys = append(c.Keys, key)
	c.Class = append(c.Class, uint8(g.ci))
	c.Submitted = append(c.Submitted, draw(seed, streamSource, id, 0) >= cl.Discovered)
	c.Rung = append(c.Rung, uint8(rung))
	c.CadenceMs = append(c.CadenceMs, cadence)
	c.DueMs = append(c.DueMs, due)
	c.LastOKMs = append(c.LastOKMs, last)
	c.Fate = append(c.Fate, fate)
	c.ClassPages[g.ci]++
	if fate == FateOK {
		c.ClassDemand[g.ci] += 3_600_000 / g.mean
	}
}

// indexHosts fills Hosts and Host from the keys.
func (c *Corpus) indexHosts() error {
	seen := map[string]bool{}
	for _, k := range c.Keys {
		seen[string(cachekey.Host(k))] = true
	}
	if len(seen) > math.MaxUint16+1 {
		return fmt.Errorf("sim: generate: %d hosts, at most %d", len(seen), math.MaxUint16+1)
	}
	c.Hosts = slices.Sorted(maps.Keys(seen))
	idx := make(map[string]uint16, len(c.Hosts))
	for i, h := range c.Hosts {
		idx[h] = uint16(i)
	}
	c.Host = make([]uint16, len(c.Keys))
	for i, k := range c.Keys {
		c.Host[i] = idx[string(cachekey.Host(k))]
	}
	return nil
}

// HostIndex is the index of host in Hosts, or -1.
func (c *Corpus) HostIndex(host string) int {
	i, ok := slices.BinarySearch(c.Hosts, host)
	if !ok {
		return -1
	}
	return i
}

// classCounts splits keys between the classes by share, the last class taking the rounding.
func classCounts(mix *Mix, keys int) []int {
	counts := make([]int, len(mix.Classes))
	left := keys
	for i, cl := range mix.Classes {
		n := int(math.Round(cl.Share * float64(keys)))
		if i == len(mix.Classes)-1 {
			n = left
		}
		n = max(1, min(n, left-(len(mix.Classes)-1-i)))
		counts[i] = n
		left -= n
	}
	return counts
}

// classKey is the cache key of the j-th page of class ci: device|https://sN.test/path. Pages
// come in device pairs; an exact route has one page per site and device, a prefix route
// numbers its pages and spreads them over the sites.
func classKey(mix *Mix, ci, j, sites int) []byte {
	cl := mix.Classes[ci]
	devs := len(mix.Devices)
	dev, n := mix.Devices[j%devs], j/devs
	site, path := n%sites, cl.Route.Path
	if cl.Route.Match == "prefix" {
		path += strconv.Itoa(n)
	} else {
		site = n
	}
	k := make([]byte, 0, len(dev)+len(path)+24)
	k = append(k, dev...)
	k = append(k, "|https://s"...)
	k = strconv.AppendInt(k, int64(site), 10)
	k = append(k, ".test"...)
	k = append(k, path...)
	return k
}

// policyFor compiles cfg with the mix's routes and, when boost > 0, that sitemap boost, and
// returns the policy with the configuration it was compiled from. It works on a copy: cfg is
// shared by every scenario.
func policyFor(cfg *config.Config, mix *Mix, boost float64) (*policy.Policy, *config.Config, error) {
	c := *cfg
	c.Routes = mix.Routes()
	if boost > 0 {
		c.Queue.Ready.SubmittedBoost = boost
	}
	if err := c.Validate(); err != nil {
		return nil, nil, fmt.Errorf("sim: configuration: %w", err)
	}
	pol, err := assemble.Policy(&c)
	if err != nil {
		return nil, nil, fmt.Errorf("sim: configuration: %w", err)
	}
	return pol, &c, nil
}
