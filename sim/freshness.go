package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
)

// Scoring is what ranks the due rows of a scenario: production's score (relative lateness, or
// the Mode's own order), or the freshness package's.
type Scoring uint8

const (
	// ScoreProduction: policy.Score as configured (index order, ready).
	ScoreProduction Scoring = iota
	// ScoreFreshness: freshness.Score from what the run learned online, from its own renders
	// (changed or not since the previous one) and the simulated requests through
	// freshness.Counter.
	ScoreFreshness
	// ScoreOracle: lateness against the optimal interval, 1/fᵢ from freshness.Optimal on every
	// page's true λᵢ and μᵢ under the run's render budget, within the same bounds.
	ScoreOracle
	// DueFreshness is production's queue.policy freshness: no scorer at all. After a success
	// the row is filed due when its marginal value reaches the threshold ν, within the floor
	// and the ceiling (freshness.DueAfter, as the Applier files it), from the page's estimator
	// and request counter as production feeds them (the configuration's prior weight and
	// request_tau, the route's interval as the change prior); a rise of a page's request rate
	// brings its due time forward (the demand flush). Each due time is filed with its rank
	// interval (freshness.RankInterval); the sweep ranks the due rows by lateness ÷ rank
	// interval and reads by class, as production does. ν and the ceilings are fixed (the
	// configuration's freshness.threshold, the route's interval) unless the scenario follows
	// capacity (Scenario.Follow).
	DueFreshness
)

// FreshOptions configure the freshness measurements of a run with ground truth.
type FreshOptions struct {
	Truth *Truth
	// MinIntervalDivisor sets each route's floor (min_interval) to its interval ÷ this.
	MinIntervalDivisor float64
	// RequestTau is the request counters' time constant.
	RequestTau time.Duration
	// PriorWeight is the change-rate prior's weight in pseudo-renders; the prior's rate is the
	// route's pooled estimate from every render of its pages so far.
	PriorWeight float64
}

// FreshResult is what a run with ground truth measured in its window.
type FreshResult struct {
	// Mix is the truth's name (TruthMix.Name).
	Mix string
	// StaleShare is the share of requests served stale: Σ μᵢ·(time page i's rendered copy
	// differed from the site) ÷ Σ μᵢ·window, over the pages that can render. The expectation
	// over request arrivals, given the run's actual changes and renders.
	StaleShare float64
	// RouteMax and RouteP99 are, per route class, the largest and the 99th percentile time
	// between two successful renders of a page, ÷ the route's interval, over the window;
	// RouteMaxClean the largest over the renders that did not follow a failed attempt (a
	// failure's retry waits for a grant like any row, so it can stretch an interval past
	// what the scoring kept to).
	RouteMax, RouteP99, RouteMaxClean []float64
	// RouteP99Clean is RouteP99 over the renders that did not follow a failed attempt: what
	// the comparison sets the scored runs' ceilings from.
	RouteP99Clean []float64
	// RouteMaxFailures is, per route class, how many failed attempts the longest interval
	// (RouteMax) held: each such retry waited for the next sweep to be published.
	RouteMaxFailures []int
	// RouteMaxStill is, per route class, the largest time between two successful renders of a
	// page filed as still (freshness.Still: seen unchanged at every render over at least its
	// route's interval, its ceiling a still page's, freshness.Tuning.StillStretchFor), ÷ the
	// route's interval: those intervals are not in RouteMax, RouteP99 and RouteMaxClean, which
	// measure the guarantee ready's longest interval bounds. Only production's freshness files
	// pages as still; nil for the others.
	RouteMaxStill []float64
	// StillRenders counts the successful renders in the window of the pages that never change
	// (their true change rate 0).
	StillRenders int
	// Ceiling is, per route class, the ceiling the scoring kept to (÷ the route's interval); nil
	// for production's scoring.
	Ceiling []float64
	// EstimateError is, for ScoreFreshness and DueFreshness (under the scorer's pooled route
	// prior for both), the median |ln(λ̂/λ)| at the window's end over the
	// pages that change; NaN otherwise.
	EstimateError float64
}

// truthRun is the ground-truth side of a run: the site's changes, what the renders caught of
// them, the requests, and (for the freshness scorings) the state the scorer reads.
type truthRun struct {
	r  *run
	t  *Truth
	fo FreshOptions

	scoring      Scoring
	minMs, maxMs []int64 // per class: the bounds the freshness scorings keep to
	intervalMs   []int64 // per class: the route's interval
	// leadMs is the sweep interval: a row ranks as past its ceiling from one sweep before it
	// (freshness.Bounds.LeadMs), so that the ceiling holds between two publishes.
	leadMs int64

	lastRender []int64 // the last successful render; -1: never
	nextChange []int64 // the first change after lastRender (or after the start)
	changeN    []uint64

	hist      []freshness.History
	routeHist []freshness.History
	priors    []freshness.Prior // per class: prior(k), recomputed when routeHist[k] changes
	priorSet  []bool
	// uniqueHash: no two corpus keys share an shm.KeyHash, so the scorer finds a row's page
	// by its hash alone (the sweep hands it rows of the due set only) instead of by its key.
	uniqueHash bool
	counters   []freshness.Counter
	optimal    []float64 // per page per hour (ScoreOracle)
	tick       uint64
	due        *dueState // DueFreshness

	staleMuMs, muSum float64
	gaps             [][]float64 // per class, in the window (not of a page filed as still)
	stillGaps        []float64   // per class, the longest gap in the window of a page filed as still
	stillFiled       []bool      // per page: its last due time was filed at a still page's ceiling
	stillRenders     int         // successful renders in the window of pages that never change
	cleanGaps        [][]float64 // per class, in the window: the gaps not after a failure
	longest          []float64   // per class, the longest gap in the window so far
	longestFailures  []int       // per class, the failed attempts that gap held
}

func newTruthRun(r *run, fo FreshOptions) (*truthRun, error) {
	c := r.c
	n := c.Len()
	nc := len(c.Mix.Classes)
	tr := &truthRun{r: r, t: fo.Truth, fo: fo, scoring: r.sc.Score,
		minMs: make([]int64, nc), maxMs: make([]int64, nc), intervalMs: make([]int64, nc),
		lastRender: slices.Clone(c.LastOKMs), nextChange: make([]int64, n), changeN: make([]uint64, n),
		gaps: make([][]float64, nc), stillGaps: make([]float64, nc), stillFiled: make([]bool, n), cleanGaps: make([][]float64, nc), longest: make([]float64, nc), longestFailures: make([]int, nc), routeHist: make([]freshness.History, nc),
		priors: make([]freshness.Prior, nc), priorSet: make([]bool, nc), uniqueHash: len(r.byHash) == n,
		leadMs: r.cfg.Queue.Ready.SweepInterval.Ms()}
	if len(fo.Truth.Mu) != n {
		return nil, fmt.Errorf("truth drawn for %d pages, corpus has %d", len(fo.Truth.Mu), n)
	}
	if tr.scored() && (r.sc.Ceiling == nil || len(*r.sc.Ceiling) != nc) {
		return nil, fmt.Errorf("scenario %q: a freshness scoring needs a ceiling per route class", r.sc.Name)
	}
	for k, cl := range c.Mix.Classes {
		tr.intervalMs[k] = cl.Route.Interval.Ms()
		tr.minMs[k] = max(policy.MinCadence.Milliseconds(), int64(float64(tr.intervalMs[k])/max(fo.MinIntervalDivisor, 1)))
		if tr.scored() {
			tr.maxMs[k] = int64(float64(tr.intervalMs[k]) * max(1, (*r.sc.Ceiling)[k]))
		}
	}
	for i := range n {
		from := c.Start
		if tr.lastRender[i] >= 0 {
			from = tr.lastRender[i]
		}
		tr.nextChange[i] = tr.t.nextChange(i, from, 0)
		tr.changeN[i] = 1
		if c.Fate[i] == FateOK {
			tr.muSum += tr.t.Mu[i]
		}
	}
	switch tr.scoring {
	case DueFreshness:
		tr.initDue()
		fallthrough
	case ScoreFreshness:
		tr.hist = make([]freshness.History, n)
		tr.counters = make([]freshness.Counter, n)
		// A page's counter starts at its route's mean request rate: what a route-level counter
		// would show, and all the run knows of a page before its own requests.
		sum, cnt := make([]float64, nc), make([]float64, nc)
		for i := range n {
			sum[c.Class[i]] += tr.t.Mu[i]
			cnt[c.Class[i]]++
		}
		for i := range n {
			k := c.Class[i]
			tr.counters[i] = freshness.NewCounter(c.Start, sum[k]/cnt[k], tr.tauMs())
		}
	case ScoreOracle:
		pages := make([]freshness.Page, n)
		for i := range n {
			if c.Fate[i] != FateOK {
				continue
			}
			k := c.Class[i]
			pages[i] = freshness.Page{Lambda: tr.t.Lambda[i], Mu: tr.t.Mu[i],
				MinPerHour: 3_600_000 / float64(tr.maxMs[k]), MaxPerHour: 3_600_000 / float64(tr.minMs[k])}
		}
		// The budget is the renders per hour that reach the corpus and succeed.
		m := c.Mix.Render
		budget := r.res.CapacityPerHour * (1 - m.Unscheduled) * (1 - m.Transient)
		tr.optimal = freshness.Optimal(pages, budget).PerHour
	}
	return tr, nil
}

// score ranks a due row for the freshness scorings (policy.Scorer).
func (tr *truthRun) score(row *policy.Row, _ int64, nowMs int64) float64 {
	i, ok := tr.page(row.Key)
	if !ok {
		return 0
	}
	k := tr.r.c.Class[i]
	b := freshness.Bounds{MinIntervalMs: tr.minMs[k], MaxIntervalMs: tr.maxMs[k], LeadMs: tr.leadMs}
	if tr.lastRender[i] < 0 {
		return freshness.Score(0, 0, b.MaxIntervalMs, b) // never rendered: as late as a row gets
	}
	since := nowMs - tr.lastRender[i]
	if tr.scoring == ScoreOracle {
		if b.Overdue(since) || since < b.MinIntervalMs {
			return freshness.Score(0, 0, since, b)
		}
		return float64(since) / 3_600_000 * tr.optimal[i]
	}
	lambda := tr.hist[i].Rate(tr.classPrior(k))
	mu := tr.counters[i].PerHour(nowMs, tr.tauMs())
	return freshness.Score(lambda, mu, since, b)
}

// page returns the corpus page of key. The scorer runs once per due row and sweep: the hash
// map is a fraction of the key map's cost.
func (tr *truthRun) page(key []byte) (int, bool) {
	if tr.uniqueHash {
		id, ok := tr.r.byHash[shm.KeyHash(key)]
		return int(id), ok
	}
	id, ok := tr.r.ds.ID(key)
	return int(id), ok
}

// classPrior is prior(k), kept until a render of class k changes its pooled history.
func (tr *truthRun) classPrior(k uint8) freshness.Prior {
	if !tr.priorSet[k] {
		tr.priors[k], tr.priorSet[k] = tr.prior(k), true
	}
	return tr.priors[k]
}

// prior is route class k's change-rate prior: its pages' pooled estimate so far (1/interval
// before any render), over pseudo-renders at its floor.
func (tr *truthRun) prior(k uint8) freshness.Prior {
	rate := tr.routeHist[k].Rate(freshness.Prior{})
	if tr.routeHist[k].Changed+tr.routeHist[k].UnchangedHours == 0 {
		rate = 3_600_000 / float64(tr.intervalMs[k])
	}
	return freshness.Prior{RatePerHour: rate, Weight: tr.fo.PriorWeight, IntervalMs: tr.minMs[k]}
}

// scored reports whether a scorer ranks the due rows (the scorer's freshness and the oracle),
// which then keep to the scenario's ceilings.
func (tr *truthRun) scored() bool {
	return tr.scoring == ScoreFreshness || tr.scoring == ScoreOracle
}

// tauMs is the request counters' time constant: the configuration's request_tau for
// production's mode, FreshOptions.RequestTau for the scorer.
func (tr *truthRun) tauMs() int64 {
	if tr.scoring == DueFreshness {
		return tr.r.cfg.Freshness.RequestTau.Ms()
	}
	return tr.fo.RequestTau.Milliseconds()
}

// rendered records a completed attempt of page i at nowMs, decided d, and returns the due time
// to file and its rank interval (0: none, the cadence): the policy's due time; for the
// freshness scorings after a success, the floor from now (every row past its floor is a
// candidate; the score decides); for production's freshness after a success, the crossing
// within the bounds and its rank interval (dueAfter), and after a failure the policy's retry
// with the rank interval the Applier files with it (freshness.RetryRank).
func (tr *truthRun) rendered(i int, nowMs int64, d *policy.Decision) (int64, int64) {
	tr.meter(i, nowMs)
	dueMs, cadenceMs := d.DueAtMs, d.CadenceMs
	if d.Class != policy.ClassSuccess {
		if tr.scoring == DueFreshness {
			return dueMs, freshness.RetryRank(d.Class == policy.ClassTransient, d.NeverRendered)
		}
		return dueMs, 0
	}
	if tr.r.c.Fate[i] != FateOK {
		return dueMs, 0
	}
	k := tr.r.c.Class[i]
	last, change := tr.lastRender[i], tr.nextChange[i]
	ws, end := tr.r.windowStart, tr.r.end
	staleFrom := change
	if last < 0 {
		staleFrom = math.MinInt64 // nothing was served fresh before the first render
	}
	if staleFrom < nowMs {
		if a, b := max(staleFrom, ws), min(nowMs, end); b > a {
			tr.staleMuMs += tr.t.Mu[i] * float64(b-a)
		}
	}
	if nowMs >= ws && nowMs < end && tr.t.Lambda[i] == 0 {
		tr.stillRenders++
	}
	if last >= 0 {
		if nowMs >= ws && tr.stillFiled[i] {
			tr.stillGaps[k] = max(tr.stillGaps[k], float64(nowMs-last)/float64(tr.intervalMs[k]))
		} else if nowMs >= ws {
			gap := float64(nowMs-last) / float64(tr.intervalMs[k])
			tr.gaps[k] = append(tr.gaps[k], gap)
			if gap > tr.longest[k] {
				tr.longest[k], tr.longestFailures[k] = gap, int(tr.r.failCount[i])
			}
			if tr.r.failCount[i] == 0 { // the count before this attempt: failures since the last success
				tr.cleanGaps[k] = append(tr.cleanGaps[k], gap)
			}
		}
		o := freshness.Observation{Changed: change <= nowMs, IntervalMs: nowMs - last}
		tr.routeHist[k].Observe(o)
		tr.priorSet[k] = false
		if tr.hist != nil {
			tr.hist[i].Observe(o)
		}
	}
	for tr.nextChange[i] <= nowMs {
		tr.nextChange[i] = tr.t.nextChange(i, tr.nextChange[i], tr.changeN[i])
		tr.changeN[i]++
	}
	tr.lastRender[i] = nowMs
	switch tr.scoring {
	case ScoreProduction:
		return dueMs, 0
	case DueFreshness:
		iv, rank := tr.dueAfter(i, cadenceMs, nowMs)
		return nowMs + iv, rank
	}
	return nowMs + tr.minMs[k], 0
}

// sample counts the requests of the sample period that ends at nowMs into the counters (and,
// for production's freshness, flushes them as the demand flush does).
func (tr *truthRun) sample(nowMs int64) error {
	if tr.counters == nil {
		return nil
	}
	h := tr.r.opts.SampleEvery.Hours()
	tau := tr.tauMs()
	for i := range tr.counters {
		if n := tr.t.requests(i, tr.tick, h); n > 0 {
			tr.counters[i].Add(nowMs, n, tau)
		}
	}
	tr.tick++
	if tr.scoring == DueFreshness {
		tr.tune(nowMs)
		return tr.demandFlush(nowMs)
	}
	return nil
}

// finish closes the window: every page stale at its end counts to the end.
func (tr *truthRun) finish() *FreshResult {
	c := tr.r.c
	ws, end := tr.r.windowStart, tr.r.end
	for i := range c.Len() {
		if c.Fate[i] != FateOK {
			continue
		}
		from := tr.nextChange[i]
		if tr.lastRender[i] < 0 {
			from = ws
		}
		if a := max(from, ws); a < end {
			tr.staleMuMs += tr.t.Mu[i] * float64(end-a)
		}
	}
	fr := &FreshResult{Mix: tr.t.Mix.Name, EstimateError: math.NaN()}
	if tr.muSum > 0 {
		fr.StaleShare = tr.staleMuMs / (tr.muSum * float64(end-ws))
	}
	fr.RouteMaxFailures = slices.Clone(tr.longestFailures)
	fr.StillRenders = tr.stillRenders
	if tr.scoring == DueFreshness {
		fr.RouteMaxStill = slices.Clone(tr.stillGaps)
	}
	for k, g := range tr.gaps {
		mx, p99 := 0.0, 0.0
		if len(g) > 0 {
			slices.Sort(g)
			mx, p99 = g[len(g)-1], percentile(g, 0.99)
		}
		fr.RouteMax, fr.RouteP99 = append(fr.RouteMax, mx), append(fr.RouteP99, p99)
		cmx, cp99 := 0.0, 0.0
		if cg := tr.cleanGaps[k]; len(cg) > 0 {
			slices.Sort(cg)
			cmx, cp99 = cg[len(cg)-1], percentile(cg, 0.99)
		}
		fr.RouteMaxClean, fr.RouteP99Clean = append(fr.RouteMaxClean, cmx), append(fr.RouteP99Clean, cp99)
		if tr.scored() {
			fr.Ceiling = append(fr.Ceiling, float64(tr.maxMs[k])/float64(tr.intervalMs[k]))
		}
	}
	if tr.hist != nil {
		var errs []float64
		for i := range c.Len() {
			if l := tr.t.Lambda[i]; l > 0 && c.Fate[i] == FateOK {
				est := tr.hist[i].Rate(tr.prior(c.Class[i]))
				errs = append(errs, math.Abs(math.Log(max(est, 1e-9)/l)))
			}
		}
		if len(errs) > 0 {
			slices.Sort(errs)
			fr.EstimateError = percentile(errs, 0.5)
		}
	}
	return fr
}

// FreshRow is one line of the freshness comparison (make sim-freshness): a policy at a
// capacity on a mix, what share of requests it served stale and how late it rendered.
type FreshRow struct {
	Mix        string  `json:"mix"`
	Capacity   float64 `json:"capacity"`
	Policy     string  `json:"policy"`
	StaleShare float64 `json:"stale_request_share"`
	// AgeOverCadence is the mean age at render ÷ TTL of the window's successful renders that
	// did not follow a failure (Result.Clean).
	AgeOverCadence float64 `json:"age_over_cadence"`
	// Per route class, the largest and 99th-percentile time between two successful renders of
	// a page ÷ the route's interval; and the ceiling the freshness scorings kept to.
	RouteMax map[string]float64 `json:"route_max_interval_ratio"`
	RouteP99 map[string]float64 `json:"route_p99_interval_ratio"`
	// RouteMaxClean is RouteMax over the renders that did not follow a failed attempt.
	RouteMaxClean map[string]float64 `json:"route_max_clean_interval_ratio"`
	// RouteMaxFailures is how many failed attempts the longest interval held.
	RouteMaxFailures map[string]int `json:"route_max_failed_attempts,omitempty"`
	// RouteMaxStill is, for production's freshness, the largest interval of a page filed as
	// still (FreshResult.RouteMaxStill), which the route columns leave out.
	RouteMaxStill map[string]float64 `json:"route_max_still_interval_ratio,omitempty"`
	// StillRenders counts the window's successful renders of the pages that never change.
	StillRenders int                `json:"still_renders"`
	Ceiling      map[string]float64 `json:"ceiling_interval_ratio,omitempty"`
	Renders      int                `json:"renders"`
	Idle         int                `json:"idle_slots"`
	// GrantsReady and GrantsIndex count the run's grants from the published set and from the
	// index scan the claims fall back to (which takes rows in due order, whatever their score).
	GrantsReady int `json:"grants_ready"`
	GrantsIndex int `json:"grants_index"`
	// EstimateError is, for the learning policies, the median |ln(λ̂/λ)| at the window's end
	// (production's freshness included, its histories read under the scorer's pooled route
	// prior rather than production's: a measure of what the renders observed).
	EstimateError *float64 `json:"estimate_error,omitempty"`
	Keys          int      `json:"keys"`
	WarmupHours   float64  `json:"warmup_hours"`
	WindowHours   float64  `json:"window_hours"`
}

// FreshPolicies are the freshness comparison's policies, in report order.
var FreshPolicies = []string{"index", "ready", "freshness", "freshness-scorer", "oracle"}

// RunFreshness runs the freshness comparison on corpus c with truth: at each capacity, index
// order, ready (production's lanes) and production's freshness (DueFreshness, its own
// capacity-following ceilings), then the freshness scorer and the oracle with each route's
// ceiling set to the 99th percentile of the interval ready itself left between renders at that
// capacity (at least the route's interval), so that neither may stretch a route beyond what
// ready does. The percentile is over the renders that did not follow a failed attempt: a
// failure's retry stretches an interval whatever the policy, and a route of a few pages (the
// home page) would otherwise take ready's failure as its ceiling and add its own on top.
func RunFreshness(ctx context.Context, c *Corpus, o Options, fo FreshOptions, capacities []float64, parallel int) ([]FreshRow, error) {
	return RunFreshnessMixes(ctx, []FreshMix{{Corpus: c, Fresh: fo}}, o, capacities, parallel)
}

// FreshMix is one corpus with its ground truth, for RunFreshnessMixes.
type FreshMix struct {
	Corpus *Corpus
	Fresh  FreshOptions
}

// RunFreshnessMixes runs RunFreshness's comparison on every mix and returns the rows mix by
// mix, capacity by capacity, in FreshPolicies order. Its runs share parallel workers: index,
// ready and production's freshness of every (mix, capacity) cell start at once, and a cell's
// scorer and oracle runs as soon as its ready run has set their ceilings, so no stage waits for another cell's. Every
// run has its own state, so the rows do not depend on parallel or on the order runs finish.
func RunFreshnessMixes(ctx context.Context, mixes []FreshMix, o Options, capacities []float64, parallel int) ([]FreshRow, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, max(1, parallel))
	type cell struct {
		mix      FreshMix
		opts     Options
		capacity float64
		res      [5]*Result // FreshPolicies order
	}
	var (
		cells    []*cell
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	// run runs one scenario of a cell in a worker slot and files its result.
	run := func(c *cell, k int, sc Scenario) bool {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			fail(ctx.Err())
			return false
		}
		res, err := Run(ctx, c.mix.Corpus, c.opts, sc)
		<-slots
		if err != nil {
			fail(err)
			return false
		}
		if c.opts.OnDone != nil {
			c.opts.OnDone(res)
		}
		c.res[k] = res
		return true
	}
	for _, m := range mixes {
		for _, capacity := range capacities {
			c := &cell{mix: m, opts: o, capacity: capacity}
			fo := m.Fresh
			c.opts.Fresh = &fo
			cells = append(cells, c)
		}
	}
	// The lowest capacities first: the lower the capacity, the more rows are due, and the
	// longer a run takes; starting them first leaves no long run alone at the end.
	order := slices.Clone(cells)
	slices.SortStableFunc(order, func(a, b *cell) int { return cmp.Compare(a.capacity, b.capacity) })
	for _, c := range order {
		wg.Go(func() {
			if !run(c, 1, Scenario{Name: "ready", Mode: policy.ModeLanes, Capacity: c.capacity}) {
				return
			}
			ceiling := make([]float64, len(c.mix.Corpus.Mix.Classes))
			for k, v := range c.res[1].Fresh.RouteP99Clean {
				ceiling[k] = max(1, v)
			}
			wg.Go(func() {
				run(c, 3, Scenario{Name: "freshness-scorer", Mode: policy.ModeLanes, Capacity: c.capacity, Score: ScoreFreshness, Ceiling: &ceiling})
			})
			run(c, 4, Scenario{Name: "oracle", Mode: policy.ModeLanes, Capacity: c.capacity, Score: ScoreOracle, Ceiling: &ceiling})
		})
	}
	for _, c := range order {
		wg.Go(func() {
			run(c, 2, Scenario{Name: "freshness", Mode: policy.ModeLanes, Capacity: c.capacity, Score: DueFreshness})
		})
	}
	for _, c := range order {
		wg.Go(func() { run(c, 0, Scenario{Name: "index", Mode: policy.ModeEDF, Capacity: c.capacity}) })
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	var rows []FreshRow
	for _, c := range cells {
		for _, res := range c.res {
			rows = append(rows, freshRow(c.mix.Corpus, c.opts, c.mix.Fresh, res))
		}
	}
	return rows, nil
}

func freshRow(c *Corpus, o Options, fo FreshOptions, res *Result) FreshRow {
	f := res.Fresh
	byClass := func(v []float64) map[string]float64 {
		if v == nil {
			return nil
		}
		m := make(map[string]float64, len(v))
		for k, x := range v {
			m[c.Mix.Classes[k].Name] = x
		}
		return m
	}
	row := FreshRow{Mix: fo.Truth.Mix.Name, Capacity: res.Scenario.Capacity, Policy: res.Scenario.Name,
		StaleShare: f.StaleShare, AgeOverCadence: res.Clean.Value(), RouteMax: byClass(f.RouteMax),
		RouteP99: byClass(f.RouteP99), RouteMaxClean: byClass(f.RouteMaxClean), Ceiling: byClass(f.Ceiling), Renders: res.Renders, Idle: res.Idle,
		RouteMaxStill: byClass(f.RouteMaxStill), StillRenders: f.StillRenders,
		GrantsReady: res.GrantsReady, GrantsIndex: res.GrantsIndex,
		Keys: c.Len(), WarmupHours: o.Warmup.Hours(), WindowHours: o.Window.Hours()}
	if f.RouteMaxFailures != nil {
		row.RouteMaxFailures = make(map[string]int, len(f.RouteMaxFailures))
		for k, n := range f.RouteMaxFailures {
			row.RouteMaxFailures[c.Mix.Classes[k].Name] = n
		}
	}
	if !math.IsNaN(f.EstimateError) {
		e := f.EstimateError
		row.EstimateError = &e
	}
	return row
}

// FreshTable renders rows as a markdown table: per mix and capacity, each policy's stale share,
// its change against ready's, its distance from the oracle's, age ÷ cadence, and per route the
// largest interval between renders ÷ the route's interval, the largest of those that did not
// follow a failure, and the 99th percentile.
func FreshTable(rows []FreshRow) string {
	var b strings.Builder
	var classes []string
	for _, r := range rows {
		for k := range r.RouteMax {
			if !slices.Contains(classes, k) {
				classes = append(classes, k)
			}
		}
	}
	slices.Sort(classes)
	b.WriteString("| mix | capacity | policy | requests served stale | vs ready | vs oracle | age ÷ cadence |")
	for _, k := range classes {
		fmt.Fprintf(&b, " %s: max / clean max (p99) interval ÷ route's |", k)
	}
	b.WriteString("\n|---|---|---|---|---|---|---|")
	b.WriteString(strings.Repeat("---|", len(classes)))
	b.WriteString("\n")
	find := func(mix string, capacity float64, policy string) *FreshRow {
		for i := range rows {
			if rows[i].Mix == mix && rows[i].Capacity == capacity && rows[i].Policy == policy {
				return &rows[i]
			}
		}
		return nil
	}
	rel := func(v float64, ref *FreshRow) string {
		if ref == nil || ref.StaleShare == 0 {
			return "—"
		}
		return fmt.Sprintf("%+.1f %%", 100*(v/ref.StaleShare-1))
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %g %% | %s | %.1f %% | %s | %s | %.2f× |", r.Mix, 100*r.Capacity, r.Policy, 100*r.StaleShare,
			rel(r.StaleShare, find(r.Mix, r.Capacity, "ready")), rel(r.StaleShare, find(r.Mix, r.Capacity, "oracle")), r.AgeOverCadence)
		for _, k := range classes {
			fmt.Fprintf(&b, " %.2f× / %.2f× (%.2f×) |", r.RouteMax[k], r.RouteMaxClean[k], r.RouteP99[k])
		}
		b.WriteString("\n")
	}
	return b.String()
}
