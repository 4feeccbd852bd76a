package sim

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/freshq/freshq/assemble/settings"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/sweep"
)

// Scenario is one policy at one capacity.
type Scenario struct {
	Name     string      // e.g. "ready b=1"
	Mode     policy.Mode // the sweep's selection mode
	Boost    float64     // queue.ready.submitted_boost; 0 = the configuration's
	Capacity float64     // render capacity as a share of DemandPerHour
	// PerHour, if positive, is the farm's capacity in renders per hour instead of Capacity ×
	// DemandPerHour: the host scenarios hold the farm fixed while the corpus changes.
	PerHour float64
	// Score and Ceiling, for runs with ground truth (Options.Fresh): what ranks the due rows
	// in place of policy.Score, and each route class's ceiling as a multiple of its interval
	// (a pointer, so that a Scenario stays comparable).
	Score   Scoring
	Ceiling *[]float64
}

// Policies are the standard policies, in report order: index order (what freshq replaces),
// relative lateness with boost 1 (the physical limit's policy), with the default boost, the
// production lanes, and strict lane priority (to show starvation).
func Policies() []Scenario {
	return []Scenario{
		{Name: "edf", Mode: policy.ModeEDF},
		{Name: "ready b=1", Mode: policy.ModeScore, Boost: 1},
		{Name: "ready b=2", Mode: policy.ModeScore, Boost: 2},
		{Name: "ready+lanes", Mode: policy.ModeLanes},
		{Name: "strict", Mode: policy.ModeStrict},
	}
}

// Capacities are the standard capacities, as shares of demand.
func Capacities() []float64 { return []float64{1, 0.75, 0.5} }

// StandardScenarios is every standard policy at every standard capacity, capacity-major.
func StandardScenarios() []Scenario {
	var out []Scenario
	for _, c := range Capacities() {
		for _, p := range Policies() {
			p.Capacity = c
			out = append(out, p)
		}
	}
	return out
}

// Options are the settings every scenario of a run shares.
type Options struct {
	// Config is the freshq configuration (routes are replaced by the mix's; the boost by the
	// scenario's). nil means config.Default().
	Config *config.Config
	// Warmup runs before anything is measured; Window is measured. Both must be multiples of
	// SampleEvery.
	Warmup, Window time.Duration
	// CoarseSweepEvery, if set, is the sweep interval for the start of the warm-up, until Settle
	// before the window; from then on the sweep runs at the configured interval, as after a
	// reload. It only buys simulator time: the warm-up exists to reach the steady state from
	// the starting backlog, and Settle at the configured interval lets every class whose
	// cadence is shorter than Settle re-settle under it before anything is measured.
	CoarseSweepEvery, Settle time.Duration
	// ClaimEvery is how often the render farm claims the renders its capacity allows since its
	// last claim (default 5s). SampleEvery is the period of the standing-lag samples and of the
	// charts' points (default 1h).
	ClaimEvery, SampleEvery time.Duration
	// OnDone, if set, is called with each scenario's result as it finishes (RunAll calls it
	// from several goroutines). It is for progress reports; results come back in order anyway.
	OnDone func(*Result)
	// Fresh, if set, gives the run ground truth (changes and requests, freshness.go) and
	// measures the share of requests served stale; a scenario's Score needs it.
	Fresh *FreshOptions
}

// WithDefaults returns o with its zero fields defaulted, or why it cannot run.
func (o Options) WithDefaults() (Options, error) {
	out := o
	if out.Config == nil {
		out.Config = config.Default()
	}
	if out.ClaimEvery == 0 {
		out.ClaimEvery = 5 * time.Second
	}
	if out.SampleEvery == 0 {
		out.SampleEvery = time.Hour
	}
	switch {
	case out.ClaimEvery < time.Millisecond || out.SampleEvery < time.Millisecond:
		return out, fmt.Errorf("sim: options: claim and sample periods must be at least 1ms")
	case out.Window <= 0 || out.Warmup < 0:
		return out, fmt.Errorf("sim: options: the window must be positive and the warm-up not negative")
	case out.CoarseSweepEvery < 0 || out.Settle < 0 || (out.CoarseSweepEvery > 0 && out.Settle > out.Warmup):
		return out, fmt.Errorf("sim: options: the coarse sweep interval and settle time must not be negative, and settle must fit in the warm-up")
	case out.Warmup%out.SampleEvery != 0 || out.Window%out.SampleEvery != 0:
		return out, fmt.Errorf("sim: options: warm-up %s and window %s must be multiples of the sample period %s",
			out.Warmup, out.Window, out.SampleEvery)
	}
	return out, nil
}

// ClassResult is what one class showed in the window. Lateness ratios are age at render ÷ TTL:
// (completion of a successful render − completion of the page's previous successful render) ÷
// the cadence that previous render set, over the successful renders completed in the window
// of pages that had been rendered before. 1.0 is a page rendered exactly when due.
type ClassResult struct {
	Name  string
	Pages int // pages of the class that can render (gone and noindex pages excluded)
	// Renders counts render attempts of the class's pages (every outcome, every fate) completed
	// in the window.
	Renders int
	// DueAtOpen counts the class's pages that were due when the window opened.
	DueAtOpen int
	// Ratios is how many lateness ratios Mean, P99 and Max are computed over.
	Ratios         int
	Mean, P99, Max float64
	// Stale is the standing lag: the share of the class's pages that were overdue (due, not yet
	// rendered), averaged over the samples in the window.
	Stale float64
	// Starved counts pages that were already due when the window opened and were never granted
	// a render in it (a render in flight at the opening counts as granted). Of those, StarvedRetrying were retrying after a failure when it opened (a
	// retry is filed at now + backoff, so its lateness starts again from zero), and
	// StarvedUnpinned had been re-filed due now by the sweep's unpin hatch since their last
	// render, which resets lateness the same way; StarvedNever had never been rendered (the
	// cold lane, like a retrying page).
	Starved, StarvedRetrying, StarvedUnpinned, StarvedNever int
}

// Result is one scenario's outcome. Every field is a deterministic function of (corpus,
// options, scenario).
type Result struct {
	Scenario        Scenario
	CapacityPerHour float64
	// Classes holds the mix's route classes in order, then "submitted" and "discovered" (by the
	// page's source, whatever its route).
	Classes []ClassResult
	// Offered counts the render slots the capacity gave in the window; Unscheduled the slots of
	// those the farm spent on work outside the corpus (the mix's render.unscheduled share, the
	// same under every policy); Renders the attempts granted (started) from the queue; Idle the
	// slots that found nothing to claim. Renders + Idle + Unscheduled = Offered.
	Renders, Offered, Idle, Unscheduled int
	// Outcomes of the attempts completed in the window.
	OK, Transient, Deterministic int
	// Sweeps ran in the whole run; Capped hit sweep_cap; Unpins filed the floor's head forward.
	Sweeps, Capped, Unpins int
	// MeanDueRows and MaxDueRows describe the rows each sweep of the window read.
	MeanDueRows float64
	MaxDueRows  int
	// ClassSweeps counts the sweeps that read by class (the class merge, as on worker 0's
	// Badger store); the others iterated the whole due set (ModeEDF).
	ClassSweeps int
	// Grants by source over the whole run; StaleGrants were granted from a ready entry whose
	// row had been refiled since the publish (rendered anyway, as production would).
	GrantsReady, GrantsIndex, StaleGrants int
	// AfterFailure and Clean split the window's lateness ratios (every class) by whether the
	// render followed a failed attempt of the same page since its previous success. A retry is
	// filed at now + backoff, so the lateness it had built up is not what ranks it any more.
	AfterFailure, Clean Mean
	// P99 and Max are over every ratio of the window; CleanP99 and CleanMax over those that
	// did not follow a failure.
	P99, Max, CleanP99, CleanMax float64
	// Hosts holds one result per corpus host, in Corpus.Hosts order.
	Hosts []HostResult
	// HostRefused counts, over the whole run, the ready entries taken and the index rows passed
	// over because their host was at its limit (shm.CounterRenderRefusedHost); Queued the claims
	// the index fallback answered with claim.ErrQueuedBehindLeases, which leave their slots idle
	// as a render worker does (it claims again at its next turn).
	HostRefused uint64
	Queued      int
	// F1 is the largest number of rows seen below the floor at a check (after every sweep): 0.
	F1 int
	// Series[class][k] is the mean lateness ratio of the class's renders completed in the k-th
	// sample period of the run (warm-up included); NaN when there were none.
	Series      [][]float64
	SampleEvery time.Duration
	Warmup      time.Duration
	// Fresh is what a run with ground truth measured (Options.Fresh); nil without.
	Fresh *FreshResult
}

// HostResult is what one host showed. Lateness ratios are as in ClassResult, over the window.
type HostResult struct {
	Name string
	// Pages counts the host's pages that can render; Renders the attempts of its pages
	// completed in the window.
	Pages, Renders int
	// Ratios is how many lateness ratios Mean and P95 are computed over.
	Ratios    int
	Mean, P95 float64
	// MaxInFlight is the most renders of the host's pages in flight at one instant, over the
	// whole run: counted up when the farm starts a render, down when it completes.
	MaxInFlight int
	// MeanDue is the host's due rows (due, not yet rendered; every fate), averaged over the
	// samples in the window; DueShare is its share of all due rows, averaged the same way.
	MeanDue, DueShare float64
}

// Mean is a running mean.
type Mean struct {
	N   int
	Sum float64
}

func (m *Mean) add(v float64) { m.N++; m.Sum += v }

// Value is the mean, 0 when empty.
func (m Mean) Value() float64 {
	if m.N == 0 {
		return 0
	}
	return m.Sum / float64(m.N)
}

// Result.Classes holds the route classes followed by these two source classes.
const (
	extraSubmitted = iota
	extraDiscovered
	numExtra
)

// job is a render in flight.
type job struct {
	doneMs  int64
	seq     uint64
	id      int32
	attempt uint32
	outcome outcome.Outcome
	lease   shm.Lease
	host    claim.Job // carries only the job's host slot (HostToken), given back when the render ends
}

// run is one scenario's state.
type run struct {
	c       *Corpus
	opts    Options
	sc      Scenario
	pol     *policy.Policy
	cfg     *config.Config
	seg     *shm.Segment
	ds      *DueSet
	sw      *sweep.Sweeper
	cl      *claim.Claimer
	claimer *shm.Worker // the claiming worker's counters
	nowMs   int64
	tr      *truthRun // ground truth (Options.Fresh); nil without

	// per page
	rung        []uint8
	lastOK      []int64
	lastCad     []int64
	never       []bool
	failCount   []uint32
	failClass   []string
	failFirst   []int64
	attempts    []uint32
	dueAtOpen   []bool
	retrying    []bool // due at the window's opening and retrying after a failure
	granted     []bool // granted at least once in the window
	unpinned    []bool // re-filed by the unpin hatch since its last successful render
	neverAtOpen []bool // due at the window's opening, never rendered and not failing

	// per host
	hostInFlight []int
	hostRatios   [][]float64 // in the window
	hostDueSum   []float64   // Σ over samples of the host's due rows
	hostShareSum []float64   // Σ over samples of its share of the due rows

	byHash   map[uint64]int32 // shm.KeyHash → page: grants carry the hash, cheaper than the key
	inflight []job            // a binary heap by (doneMs, seq)
	seq      uint64

	windowStart, end int64
	opened           bool
	res              *Result
	ratios           [][]float64 // per class, in the window
	clean            []float64   // every class, in the window, not after a failure
	sums             [][]float64 // per class, per sample period: Σ ratio
	counts           [][]int
	staleSum         []float64
	samples          int
	dueRowsSum       int
	windowSweeps     int
}

// Run simulates one scenario over the corpus and returns what it measured.
func Run(ctx context.Context, c *Corpus, o Options, sc Scenario) (*Result, error) {
	opts, err := o.WithDefaults()
	if err != nil {
		return nil, err
	}
	r, err := newRun(c, opts, sc)
	if err != nil {
		return nil, fmt.Errorf("sim: %s at %g: %w", sc.Name, sc.Capacity, err)
	}
	if err := r.loop(ctx); err != nil {
		return nil, fmt.Errorf("sim: %s at %g: %w", sc.Name, sc.Capacity, err)
	}
	return r.finish(), nil
}

// RunAll runs every scenario, at most parallel at a time (each has its own state, so the
// results do not depend on parallel), and returns the results in scenario order.
func RunAll(ctx context.Context, c *Corpus, o Options, scs []Scenario, parallel int) ([]*Result, error) {
	parallel = max(1, min(parallel, len(scs)))
	out := make([]*Result, len(scs))
	errs := make([]error, len(scs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = Run(ctx, c, o, scs[i])
				if errs[i] == nil && o.OnDone != nil {
					o.OnDone(out[i])
				}
			}
		})
	}
	// Start the most expensive scenarios first, so that no long one runs alone at the end: a
	// sweep reads every due row, and the lower the capacity the more rows are due.
	order := make([]int, len(scs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scs[a].Capacity, scs[b].Capacity) })
	for _, i := range order {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func newRun(c *Corpus, opts Options, sc Scenario) (*run, error) {
	if !(sc.Capacity > 0) && !(sc.PerHour > 0) {
		return nil, fmt.Errorf("capacity must be positive, got %v", sc.Capacity)
	}
	pol, cfg, err := policyFor(opts.Config, c.Mix, sc.Boost)
	if err != nil {
		return nil, err
	}
	segOpts := shm.Options{
		ReadyCapacity: cfg.Queue.Ready.Capacity,
		KeyCapacity:   cfg.Queue.Ready.KeyCapacity,
		LeaseCapacity: cfg.Queue.MaxLeases,
		Workers:       2,
		EpochMs:       c.Start - 1, // lease expiries are kept relative to it: every clock value is after it
	}
	size, err := shm.SizeFor(segOpts)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	seg, err := shm.Format(shm.AlignedMemory(int(size)), segOpts)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	n := c.Len()
	r := &run{
		c: c, opts: opts, sc: sc, pol: pol, cfg: cfg, seg: seg, nowMs: c.Start,
		rung: slices.Clone(c.Rung), lastOK: slices.Clone(c.LastOKMs), lastCad: slices.Clone(c.CadenceMs),
		never: make([]bool, n), failCount: make([]uint32, n), failClass: make([]string, n),
		failFirst: make([]int64, n), attempts: make([]uint32, n),
		dueAtOpen: make([]bool, n), retrying: make([]bool, n), granted: make([]bool, n), unpinned: make([]bool, n),
		neverAtOpen: make([]bool, n),
		byHash:      make(map[uint64]int32, n),
	}
	r.ds = NewDueSet(seg.Floor())
	for i := range n {
		r.never[i] = c.LastOKMs[i] < 0
		row := store.Row{DueAtMs: c.DueMs[i], Projection: store.Projection{
			Submitted: c.Submitted[i], EffectiveIntervalMs: c.CadenceMs[i],
			Lanes: store.Lanes{NeverRendered: r.never[i]},
		}}
		if err := r.ds.Load(c.Keys[i], row); err != nil {
			return nil, err
		}
		// The due set numbers rows in order of first write, so a page's row id is its index.
		if id, _ := r.ds.ID(c.Keys[i]); int(id) != i {
			return nil, fmt.Errorf("corpus key %q repeats an earlier key", c.Keys[i])
		}
		r.byHash[shm.KeyHash(c.Keys[i])] = int32(i) // on a collision the later key wins; claim checks
	}
	if r.ds.Len() != n {
		return nil, fmt.Errorf("corpus has duplicate keys: %d rows for %d pages", r.ds.Len(), n)
	}
	polFn := func() *policy.Policy { return pol }
	sweepSet, claimSet := settings.SweepSettings(cfg), settings.ClaimSettings(cfg)
	sweepFn := func() *sweep.Settings { return &sweepSet }
	claimFn := func() *claim.Settings { return &claimSet }
	now := func() int64 { return r.nowMs }
	w0, err := seg.Worker(0)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	w1, err := seg.Worker(1)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	if sc.Score == ScoreProduction || sc.Score == DueFreshness {
		// The sweep reads by class, as on worker 0's Badger. The class merge bounds a class by
		// relative lateness, which orders a class's rows as their due times do; a freshness
		// score does not, so the scored runs read the whole due set, as the sweep does on a
		// store without the class index.
		r.ds.Classifier = sweep.NewClassifier(pol)
	}
	// Nothing writes beside the simulated sweep (one goroutine runs every event), so no writer
	// wraps its Changes.
	if r.sw, err = sweep.New(sweep.Options{Store: r.ds, Segment: seg, Worker: w0, Policy: polFn, Settings: sweepFn, Now: now,
		Log: zerolog.Nop(), Mode: sc.Mode, Changes: sweep.NewChanges()}); err != nil {
		return nil, err
	}
	if r.cl, err = claim.New(claim.Options{Segment: seg, Worker: w1, Settings: claimFn, Now: now, Holder: 1,
		Fallback: &claim.IndexSource{Scanner: r.ds, Segment: seg, Policy: polFn, Settings: claimFn, Now: now, Worker: w1}}); err != nil {
		return nil, err
	}
	r.claimer = w1

	r.windowStart = c.Start + opts.Warmup.Milliseconds()
	r.end = r.windowStart + opts.Window.Milliseconds()
	nClasses := len(c.Mix.Classes) + numExtra
	periods := int((r.end - c.Start) / opts.SampleEvery.Milliseconds())
	r.ratios = make([][]float64, nClasses)
	r.sums = make([][]float64, nClasses)
	r.counts = make([][]int, nClasses)
	for k := range nClasses {
		r.sums[k] = make([]float64, periods)
		r.counts[k] = make([]int, periods)
	}
	r.staleSum = make([]float64, nClasses)
	nh := len(c.Hosts)
	r.hostInFlight, r.hostRatios = make([]int, nh), make([][]float64, nh)
	r.hostDueSum, r.hostShareSum = make([]float64, nh), make([]float64, nh)
	perHour := sc.Capacity * c.DemandPerHour
	if sc.PerHour > 0 {
		perHour = sc.PerHour
	}
	r.res = &Result{Scenario: sc, CapacityPerHour: perHour, Hosts: make([]HostResult, nh),
		SampleEvery: opts.SampleEvery, Warmup: opts.Warmup, Classes: make([]ClassResult, nClasses)}
	for h, name := range c.Hosts {
		r.res.Hosts[h].Name = name
	}
	if opts.Fresh != nil {
		if r.tr, err = newTruthRun(r, *opts.Fresh); err != nil {
			return nil, err
		}
		if r.tr.scored() {
			pol = pol.WithScorer(r.tr.score) // polFn returns it from now on
		}
	} else if sc.Score != ScoreProduction {
		return nil, fmt.Errorf("scenario %q: a freshness scoring needs ground truth (Options.Fresh)", sc.Name)
	}
	return r, nil
}

// classesOf returns the two result classes of corpus page i: its route class and its source.
func (r *run) classesOf(i int) (route, source int) {
	source = len(r.c.Mix.Classes) + extraDiscovered
	if r.c.Submitted[i] {
		source = len(r.c.Mix.Classes) + extraSubmitted
	}
	return int(r.c.Class[i]), source
}

// loop is the event loop. Time advances only here, from one event to the next; at equal times
// the order is fixed: completions, the window opening, the sweep, the claim, the sample.
func (r *run) loop(ctx context.Context) error {
	start := r.c.Start
	sweepEvery := r.cfg.Queue.Ready.SweepInterval.Ms()
	coarseUntil := r.windowStart - r.opts.Settle.Milliseconds()
	if r.opts.CoarseSweepEvery <= 0 {
		coarseUntil = start
	}
	claimEvery := r.opts.ClaimEvery.Milliseconds()
	sampleEvery := r.opts.SampleEvery.Milliseconds()
	nextSweep, nextClaim, nextSample := start, start, start+sampleEvery
	// Capacity is paced in integer micro-renders so that the pacing is exact and platform-
	// independent: every claim adds capacity × claimEvery, and whole renders are claimed.
	perClaim := int64(math.Round(r.res.CapacityPerHour * 1e6 * float64(claimEvery) / 3_600_000))
	// The unscheduled share is split off the same way: every slot adds the share in micro-slots,
	// and whole slots go to the unscheduled work, so its long-run share is exact and it never
	// takes more than a claim's slots.
	unscheduled := int64(math.Round(r.c.Mix.Render.Unscheduled * 1e6))
	var credit, uCredit int64
	bg := context.Background()
	for steps := 0; ; steps++ {
		if steps%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		t := min(nextSweep, nextClaim, nextSample)
		if len(r.inflight) > 0 {
			t = min(t, r.inflight[0].doneMs)
		}
		if !r.opened {
			t = min(t, r.windowStart)
		}
		if t >= r.end {
			return nil
		}
		r.nowMs = t
		for len(r.inflight) > 0 && r.inflight[0].doneMs <= t {
			if err := r.complete(r.pop()); err != nil {
				return err
			}
		}
		if !r.opened && t == r.windowStart {
			r.open()
		}
		if t == nextSweep {
			if err := r.sweep(bg); err != nil {
				return err
			}
			if t < coarseUntil {
				nextSweep = min(t+r.opts.CoarseSweepEvery.Milliseconds(), coarseUntil)
			} else {
				nextSweep += sweepEvery
			}
		}
		if t == nextClaim {
			credit += perClaim
			n := int(credit / 1e6)
			credit -= int64(n) * 1e6
			uCredit += int64(n) * unscheduled
			u := int(uCredit / 1e6)
			uCredit -= int64(u) * 1e6
			if err := r.claim(bg, n, u); err != nil {
				return err
			}
			nextClaim += claimEvery
		}
		if t == nextSample {
			if r.tr != nil {
				if err := r.tr.sample(t); err != nil {
					return err
				}
			}
			r.sample()
			nextSample += sampleEvery
		}
	}
}

func (r *run) sweep(ctx context.Context) error {
	res, err := r.sw.Sweep(ctx)
	if err != nil {
		return err
	}
	r.res.Sweeps++
	if res.Classes {
		r.res.ClassSweeps++
	}
	if res.Capped {
		r.res.Capped++
	}
	if res.Unpinned {
		r.res.Unpins++
		if id, ok := r.ds.ID(res.PinnedKey); ok {
			r.unpinned[id] = true
		}
	}
	if r.opened {
		r.windowSweeps++
		r.dueRowsSum += res.Rows
		r.res.MaxDueRows = max(r.res.MaxDueRows, res.Rows)
	}
	// F1, checked at the instant it promises: no pass open. Buckets below the floor are
	// empty when it holds, so the check costs a walk over empty buckets.
	if n, key := r.ds.BelowFloor(); n > 0 {
		r.res.F1 = max(r.res.F1, n)
		return fmt.Errorf("F1 violated at %d: %d rows below the floor %d, e.g. %q", r.nowMs, n, r.ds.Floor().Load(), key)
	}
	return nil
}

// claim offers n render slots, of which u go to unscheduled work and the rest to the queue.
func (r *run) claim(ctx context.Context, n, u int) error {
	inWindow := r.opened
	if inWindow {
		r.res.Offered += n
		r.res.Unscheduled += u
	}
	n -= u
	if n == 0 {
		return nil
	}
	jobs, err := r.cl.Claim(ctx, n)
	if errors.Is(err, claim.ErrQueuedBehindLeases) {
		r.res.Queued++
		err = nil
	}
	if err != nil {
		return err
	}
	if inWindow {
		r.res.Idle += n - len(jobs)
		r.res.Renders += len(jobs)
	}
	for k := range jobs {
		j := &jobs[k]
		if j.Source == claim.SourceReady {
			r.res.GrantsReady++
		} else {
			r.res.GrantsIndex++
		}
		id, ok := r.byHash[j.KeyHash]
		if !ok || !bytes.Equal(r.c.Keys[id], j.Key) {
			if id, ok = r.ds.ID(j.Key); !ok { // a hash shared by two keys: look the key up
				return fmt.Errorf("granted %q, which is not in the due set", j.Key)
			}
		}
		if r.ds.DueAt(id) != j.DueAtMs {
			r.res.StaleGrants++
		}
		if inWindow {
			r.granted[id] = true
		}
		r.attempts[id]++
		h := r.c.Host[id]
		r.hostInFlight[h]++
		r.res.Hosts[h].MaxInFlight = max(r.res.Hosts[h].MaxInFlight, r.hostInFlight[h])
		lat, o := r.attempt(id, r.attempts[id])
		r.push(job{doneMs: r.nowMs + lat, id: id, attempt: r.attempts[id], outcome: o, lease: j.Lease,
			host: claim.Job{HostToken: j.HostToken}})
	}
	return nil
}

// attempt decides the latency and outcome of page id's n-th attempt: a pure function of the
// seed, the page and n, so the same attempt turns out the same under every policy.
func (r *run) attempt(id int32, n uint32) (latencyMs int64, o outcome.Outcome) {
	m, seed := &r.c.Mix.Render, r.c.Seed
	timeout := r.cfg.Render.Timeout.Ms()
	lat := int64(0)
	if med := m.LatencyMedian.Ms(); med > 0 {
		u1 := 1 - draw(seed, streamLatency1, uint64(id), uint64(n)) // (0, 1]: the log is finite
		u2 := draw(seed, streamLatency2, uint64(id), uint64(n))
		z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2) // Box–Muller
		lat = int64(math.Min(float64(med)*math.Exp(m.LatencySigma*z), float64(timeout)))
	}
	lat = max(lat, 1)
	if lat >= timeout {
		return timeout, outcome.Timeout
	}
	if draw(seed, streamTransient, uint64(id), uint64(n)) < m.Transient {
		return lat, outcome.ServerError
	}
	switch r.c.Fate[id] {
	case FateGone:
		return lat, outcome.Gone
	case FateNoindex:
		return lat, outcome.Noindex
	}
	return lat, outcome.OK
}

// complete applies a finished attempt the way worker 0 applies a result: the host's slot is
// given back; policy decides the row's next due time, cadence, rung and lanes; the row is
// filed through the due set's funnel; the lease is released.
func (r *run) complete(j job) error {
	id, now := j.id, r.nowMs
	// The host's slot first, as a render worker gives it back when the render ends, before its
	// result is delivered.
	j.host.ReleaseHost(r.seg.Leases(), now)
	i := int(id) // due-set ids are the corpus order: loaded in order, never reused
	inWindow := r.opened
	visited := draw(r.c.Seed, streamVisit, uint64(id), uint64(j.attempt)) < r.c.Mix.Classes[r.c.Class[i]].Visit
	st := policy.State{
		Key: r.c.Keys[i], Submitted: r.c.Submitted[i], CarriedMs: r.lastCad[i],
		DemandRung: r.rung[i], Visited: visited, FailCount: r.failCount[i], FailClass: r.failClass[i],
		FailFirstMs: r.failFirst[i], NeverRendered: r.never[i],
	}
	d := r.pol.Apply(st, j.outcome, now)
	due, rank := d.DueAtMs, int64(0)
	if r.tr != nil {
		due, rank = r.tr.rendered(i, now, &d)
	}
	sch, err := store.NewSchedule(r.c.Keys[i], due, r.c.Submitted[i], d.CadenceMs,
		store.Lanes{NeverRendered: d.NeverRendered, Failing: d.Failing})
	if err == nil {
		sch, err = sch.WithRankInterval(rank)
	}
	if err != nil {
		return fmt.Errorf("result of %q: %w", r.c.Keys[i], err)
	}
	if err := r.ds.writeID(id, sch); err != nil {
		return fmt.Errorf("result of %q: %w", r.c.Keys[i], err)
	}
	r.seg.Leases().Release(j.lease, now, r.cfg.Queue.ReleaseGrace.Ms())
	h := r.c.Host[i]
	r.hostInFlight[h]--
	r.rung[i], r.failCount[i], r.failClass[i], r.failFirst[i] = d.DemandRung, d.FailCount, d.FailClass, d.FailFirstMs
	r.never[i] = d.NeverRendered

	route, source := r.classesOf(i)
	if inWindow {
		r.res.Hosts[h].Renders++
		r.res.Classes[route].Renders++
		r.res.Classes[source].Renders++
		switch d.Class {
		case policy.ClassSuccess:
			r.res.OK++
		case policy.ClassTransient:
			r.res.Transient++
		default:
			r.res.Deterministic++
		}
	}
	if d.Class != policy.ClassSuccess {
		return nil
	}
	if last := r.lastOK[i]; last >= 0 && r.c.Fate[i] == FateOK {
		ratio := float64(now-last) / float64(r.lastCad[i])
		k := int((now - r.c.Start) / r.opts.SampleEvery.Milliseconds())
		for _, cl := range []int{route, source} {
			r.sums[cl][k] += ratio
			r.counts[cl][k]++
			if inWindow {
				r.ratios[cl] = append(r.ratios[cl], ratio)
			}
		}
		if inWindow {
			r.hostRatios[h] = append(r.hostRatios[h], ratio)
		}
		if inWindow {
			if st.FailCount > 0 {
				r.res.AfterFailure.add(ratio)
			} else {
				r.res.Clean.add(ratio)
				r.clean = append(r.clean, ratio)
			}
		}
	}
	r.lastOK[i], r.lastCad[i] = now, d.CadenceMs
	r.unpinned[i] = false
	return nil
}

// open starts the window: it notes which pages are due now, for the starvation count.
func (r *run) open() {
	r.opened = true
	// A page in flight at the opening is being rendered: it is not waiting for a grant.
	for k := range r.inflight {
		r.granted[r.inflight[k].id] = true
	}
	for i := range r.c.Len() {
		r.dueAtOpen[i] = r.c.Fate[i] == FateOK && r.ds.DueAt(int32(i)) <= r.nowMs
		r.retrying[i] = r.dueAtOpen[i] && r.failCount[i] > 0
		r.neverAtOpen[i] = r.dueAtOpen[i] && r.never[i] && r.failCount[i] == 0
	}
}

// sample records the standing lag: the share of each class's pages that are overdue now.
func (r *run) sample() {
	if !r.opened || r.nowMs <= r.windowStart {
		return
	}
	nc := len(r.ratios)
	due := make([]int, nc)
	pages := make([]int, nc)
	hostDue := make([]int, len(r.c.Hosts))
	allDue := 0
	for i := range r.c.Len() {
		if r.ds.DueAt(int32(i)) <= r.nowMs {
			hostDue[r.c.Host[i]]++
			allDue++
		}
		if r.c.Fate[i] != FateOK {
			continue
		}
		route, source := r.classesOf(i)
		pages[route]++
		pages[source]++
		if r.ds.DueAt(int32(i)) <= r.nowMs {
			due[route]++
			due[source]++
		}
	}
	for k := range nc {
		if pages[k] > 0 {
			r.staleSum[k] += float64(due[k]) / float64(pages[k])
		}
	}
	for h, n := range hostDue {
		r.hostDueSum[h] += float64(n)
		if allDue > 0 {
			r.hostShareSum[h] += float64(n) / float64(allDue)
		}
	}
	r.samples++
}

func (r *run) finish() *Result {
	res := r.res
	names := make([]string, 0, len(r.ratios))
	for _, cl := range r.c.Mix.Classes {
		names = append(names, cl.Name)
	}
	names = append(names, "submitted", "discovered")
	for i := range r.c.Len() {
		if r.c.Fate[i] != FateOK {
			continue
		}
		route, source := r.classesOf(i)
		res.Classes[route].Pages++
		res.Classes[source].Pages++
		if r.dueAtOpen[i] {
			res.Classes[route].DueAtOpen++
			res.Classes[source].DueAtOpen++
		}
		if r.dueAtOpen[i] && !r.granted[i] {
			for _, k := range []int{route, source} {
				res.Classes[k].Starved++
				if r.retrying[i] {
					res.Classes[k].StarvedRetrying++
				}
				if r.unpinned[i] {
					res.Classes[k].StarvedUnpinned++
				}
				if r.neverAtOpen[i] {
					res.Classes[k].StarvedNever++
				}
			}
		}
	}
	for k := range res.Classes {
		cr := &res.Classes[k]
		cr.Name = names[k]
		rs := r.ratios[k]
		cr.Ratios = len(rs)
		if len(rs) > 0 {
			cr.Mean = sortMean(rs)
			cr.P99 = percentile(rs, 0.99)
			cr.Max = rs[len(rs)-1]
		}
		if r.samples > 0 {
			cr.Stale = r.staleSum[k] / float64(r.samples)
		}
	}
	r.finishHosts()
	res.HostRefused = r.claimer.Load(shm.CounterRenderRefusedHost)
	var every []float64
	for k := range len(r.c.Mix.Classes) {
		every = append(every, r.ratios[k]...)
	}
	if len(every) > 0 {
		slices.Sort(every)
		res.P99, res.Max = percentile(every, 0.99), every[len(every)-1]
	}
	if len(r.clean) > 0 {
		slices.Sort(r.clean)
		res.CleanP99, res.CleanMax = percentile(r.clean, 0.99), r.clean[len(r.clean)-1]
	}
	if r.windowSweeps > 0 {
		res.MeanDueRows = float64(r.dueRowsSum) / float64(r.windowSweeps)
	}
	res.Series = make([][]float64, len(r.sums))
	for k := range r.sums {
		res.Series[k] = make([]float64, len(r.sums[k]))
		for p := range r.sums[k] {
			if r.counts[k][p] > 0 {
				res.Series[k][p] = r.sums[k][p] / float64(r.counts[k][p])
			} else {
				res.Series[k][p] = math.NaN()
			}
		}
	}
	r.ratios, r.clean = nil, nil
	if r.tr != nil {
		res.Fresh = r.tr.finish()
	}
	runtime.KeepAlive(r.seg)
	return res
}

// sortMean sorts rs (for the percentiles read from it next) and returns its mean; rs is not
// empty.
func sortMean(rs []float64) float64 {
	slices.Sort(rs)
	sum := 0.0
	for _, v := range rs {
		sum += v
	}
	return sum / float64(len(rs))
}

// finishHosts fills the per-host results.
func (r *run) finishHosts() {
	for i := range r.c.Len() {
		if r.c.Fate[i] == FateOK {
			r.res.Hosts[r.c.Host[i]].Pages++
		}
	}
	for h := range r.res.Hosts {
		hr := &r.res.Hosts[h]
		rs := r.hostRatios[h]
		hr.Ratios = len(rs)
		if len(rs) > 0 {
			hr.Mean = sortMean(rs)
			hr.P95 = percentile(rs, 0.95)
		}
		if r.samples > 0 {
			hr.MeanDue = r.hostDueSum[h] / float64(r.samples)
			hr.DueShare = r.hostShareSum[h] / float64(r.samples)
		}
	}
	r.hostRatios = nil
}

// percentile is the nearest-rank q-quantile of sorted, non-empty values.
func percentile(sorted []float64, q float64) float64 {
	return sorted[max(0, min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1))]
}

func (r *run) push(j job) {
	r.seq++
	j.seq = r.seq
	r.inflight = append(r.inflight, j)
	h := r.inflight
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !jobLess(&h[i], &h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (r *run) pop() job {
	h := r.inflight
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		m, a, b := i, 2*i+1, 2*i+2
		if a < len(h) && jobLess(&h[a], &h[m]) {
			m = a
		}
		if b < len(h) && jobLess(&h[b], &h[m]) {
			m = b
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	r.inflight = h
	return top
}

func jobLess(a, b *job) bool {
	if a.doneMs != b.doneMs {
		return a.doneMs < b.doneMs
	}
	return a.seq < b.seq
}
