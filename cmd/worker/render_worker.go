package main

import (
	"context"
	"errors"
	"io"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/render/chrome"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

const (
	// claimBatch is the jobs a render loop claims at once. One: a claimed job holds a slot of
	// its host from its grant to its render's end (claim.Job.HostToken), and a loop renders its
	// jobs one after another, so a loop that held four of one host's jobs would hold four of
	// its slots for one render at a time. (A batch saved index round trips when the ready set
	// cannot serve; that is the degraded path.)
	claimBatch  = 1
	resultBatch = 256 // results per delivery at most
	// resultBatchBytes bounds a delivery's encoded size: a quarter of the largest results body
	// worker 0 accepts, so that a batch, and the one result larger than it that goes alone (a
	// page is at most render.max_body, itself at most config.MaxPageBody), always fit.
	resultBatchBytes   = wire.MaxResultsBody / 4
	resultQueue        = resultBatch / 4      // results rendered and waiting for a batch
	batchesInFlight    = 3                    // result batches worker 0 is given at once, by all render workers
	resultLinger       = 5 * time.Millisecond // how long a partial batch waits for company
	resultRetryLimit   = 30 * time.Second     // then the batch is dropped and its leases released
	renderFlushTimeout = 5 * time.Second      // at a stop, how long worker 0 has to take the last results
	idleMin, idleMax   = 20 * time.Millisecond, time.Second
	worker0Wait        = time.Second // the longest pause between two looks at worker 0 while it starts
)

// oneFallback lets one claim of this worker at a time go to worker 0's index scan. The others,
// finding the ready set empty meanwhile, get nothing and back off briefly: worker 0 is already
// sweeping early to refill the set, and a crowd of index scans would only slow that down and
// take rows the new set holds.
type oneFallback struct {
	claim.Fallback
	slot chan struct{}
}

func (o *oneFallback) ClaimIndex(ctx context.Context, req claim.IndexClaim) ([]claim.Job, error) {
	select {
	case o.slot <- struct{}{}:
		defer func() { <-o.slot }()
		return o.Fallback.ClaimIndex(ctx, req)
	default:
		return nil, nil
	}
}

// pending is a result on its way to worker 0, with when its job was claimed.
type pending struct {
	wire.Result
	claimedAt time.Time
}

// runRenderWorker is workers 1..N-1: render.concurrency loops of claim, render, report.
//
// It claims only once worker 0 serves. On ctx's end (SIGTERM) it stops claiming at once and
// gives back, without rendering them, the jobs it had claimed but not begun; it waits for the
// renders in flight up to supervisor.shutdown_timeout and cancels the rest, giving their
// leases back too (no grace: the rows are claimable at once, not after a TTL); then it
// delivers every result it holds to worker 0, which the supervisor stops only after this
// worker has exited. A lease given back is counted (shm.CounterReleasedUnrendered), never
// silently dropped. The whole stop takes at most shutdown_timeout + renderFlushTimeout,
// whatever worker 0 does (see renderPool.run).
func runRenderWorker(ctx context.Context, e *env) error {
	rdrs, err := newRenderers(e)
	if err != nil {
		return wrap("renderer", err)
	}
	defer rdrs.close() // after the renders: a browser is killed and its profile removed
	releaseDeadHostSlots(e)
	client := wire.NewClient(e.socketPath)
	if !waitForWorker0(ctx, e, client) {
		return nil
	}
	fallback := &oneFallback{Fallback: api.IndexFallback{Client: client}, slot: make(chan struct{}, 1)}
	claimer, err := claim.New(claim.Options{Segment: e.seg, Worker: e.worker, Fallback: fallback, Settings: e.claimSettings, Now: nowMs, Holder: e.holder(),
		Granted: grantHook(openGrantLog(e, e.cur.Load().Config()))})
	if err != nil {
		return wrap("claimer", err)
	}
	p := &renderPool{e: e, claimer: claimer, rdrs: rdrs, sender: client, inFlight: senders(int(e.seg.Layout().Workers)), after: time.After,
		check: &conditionalCheck{client: client}}
	p.run(ctx)
	return nil
}

// releaseDeadHostSlots gives back the host slots of this worker index's earlier incarnations:
// they were killed mid-render (a worker that stops gives its own back), and each of their
// slots would keep its host below its limit until the lease's TTL. Their rows' leases lapse
// at the TTL as before; a host slot is the node's, a row lease only the row's.
func releaseDeadHostSlots(e *env) {
	me := e.holder()
	n := e.seg.Leases().ReleaseHostSlots(nowMs(), func(h uint64) bool {
		local := h&(1<<63|shm.HoldHolder) == 0 // not a remote renderer's, not a hold
		return local && h&0xffff == uint64(e.index) && h != me
	})
	if n > 0 {
		e.log.Info().Int("host_slots", n).Msg("gave back the host slots of this worker's previous incarnation")
	}
}

// jobClaimer is where a render loop claims its jobs (claim.Claimer).
type jobClaimer interface {
	Claim(ctx context.Context, n int) ([]claim.Job, error)
}

// renderPool is a render worker's loops and its delivery to worker 0.
type renderPool struct {
	e        *env
	claimer  jobClaimer
	rdrs     *renderers
	sender   resultSender
	inFlight int // result batches in flight at once (senders)
	// after is time.After: the stop's two bounds are timers made with it, so that a test can
	// fire them itself.
	after    func(time.Duration) <-chan time.Time
	released atomic.Int64      // leases given back unrendered
	check    *conditionalCheck // nil: always render
}

// run renders until ctx ends, then stops within two bounds, both timed from the stop:
//
//	stop ──── shutdown_timeout ────┬──── renderFlushTimeout ────┐
//	  claiming ends; renders run   │ drain bound: renders still │ flush bound: each delivery
//	  on; results go to worker 0   │ running, and results not   │ attempt still running is
//	                               │ yet queued, are given back │ cut; what is left is dropped
//	                               │                            │ and its leases released
//
// Every send attempt's context is derived from the flush bound, and a loop waiting to queue a
// result waits on the drain bound too, so a worker 0 that is slow to take results cannot hold
// this worker past shutdown_timeout + renderFlushTimeout, which the supervisor's bound
// (shutdown_timeout + flushMargin) exceeds: the worker is never killed for it.
func (p *renderPool) run(ctx context.Context) {
	e := p.e
	renderCtx, cancelRenders := context.WithCancel(context.Background())
	defer cancelRenders()
	flushCtx, cancelFlush := context.WithCancel(context.Background())
	defer cancelFlush()
	// Every result waiting here holds its lease, and the lease table (queue.max_leases) is
	// shared by all render workers: the queue is kept short, and the batches in flight are
	// shared out between the render workers.
	sender := newDelivery(e, p.sender, resultQueue, p.inFlight)
	_ = sender.Start(flushCtx)
	results := sender.in
	delivered := make(chan struct{})

	concurrency := e.cur.Load().Config().Render.Concurrency
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.renderLoop(ctx, renderCtx, results)
		}()
	}
	e.log.Info().Int("concurrency", concurrency).Str("renderer", e.cur.Load().Config().Render.Renderer).Msg("render worker started")

	<-ctx.Done()
	drain := e.cur.Load().Config().Supervisor.ShutdownTimeout.D()
	drainBound, flushBound := p.after(drain), p.after(drain+renderFlushTimeout)
	go func() {
		select {
		case <-flushBound:
			cancelFlush()
		case <-delivered:
		}
	}()
	loops := make(chan struct{})
	go func() { wg.Wait(); close(loops) }()
	select {
	case <-loops:
	case <-drainBound:
		e.log.Warn().Dur("shutdown_timeout", drain).Msg("renders still in flight at the drain bound; cancelling them and releasing their leases")
		cancelRenders()
		<-loops
	}
	sender.Stop() // the loops have returned: nothing queues any more
	close(delivered)
	if n := p.released.Load(); n > 0 {
		e.log.Warn().Int64("released", n).Msg("jobs given back unrendered at the stop; their leases are released and the rows are claimable at once")
	}
}

// waitForWorker0 waits until worker 0 serves (it opens the store first), looking again with a
// growing pause: a render worker that claimed meanwhile would only log failed claims. It
// reports false if ctx ends first.
func waitForWorker0(ctx context.Context, e *env, client *wire.Client) bool {
	logged := false
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, worker0Wait) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := client.Status(sctx)
		cancel()
		if err == nil && st.Serving {
			if logged {
				e.log.Info().Msg("worker 0 serves; claiming")
			}
			return true
		}
		if !logged {
			e.log.Info().Str("socket", e.socketPath).Msg("waiting for worker 0 to serve")
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
	}
}

// renderers is the renderer of the configuration in force: a reload that changes render.*
// (all but concurrency, which needs a restart) takes effect from the next render on. A reload
// that leaves render.* as it was keeps the renderer, and its warm connections.
type renderers struct {
	e     *env
	build func(config.Render) (render.Renderer, error)
	mu    sync.Mutex
	cur   *inForce
	rdr   render.Renderer
}

// newRenderers builds the renderer of the configuration in force.
func newRenderers(e *env) (*renderers, error) {
	r := &renderers{e: e, build: func(c config.Render) (render.Renderer, error) {
		if c.Renderer == "chrome" {
			return chrome.New(assemble.ChromeOptions(c), chromeHooks(e))
		}
		return render.New(assemble.RenderOptions(c), render.WithStream(uint64(e.index)))
	}}
	r.cur = e.cur.Load()
	rdr, err := r.build(r.cur.Config().Render)
	if err != nil {
		return nil, err
	}
	r.rdr = rdr
	return r, nil
}

// close closes the renderer in force if it holds a process (the chrome renderer's browser): the
// render worker's last act, after its renders ended.
func (r *renderers) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.rdr.(io.Closer); ok {
		if err := c.Close(); err != nil {
			r.e.log.Warn().Err(err).Msg("closing the renderer")
		}
	}
}

// chromeHooks counts what the chrome renderer blocks and restarts in this worker's counters.
func chromeHooks(e *env) chrome.Hooks {
	index := func(names []string, name string) int { return slices.Index(names, name) }
	return chrome.Hooks{
		Blocked: func(reason string) {
			if i := index(shm.ChromeBlockReasons[:], reason); i >= 0 {
				e.worker.Add(shm.CounterChromeBlocked+shm.Counter(i), 1)
			}
		},
		Restarted: func(reason string) {
			if i := index(shm.ChromeRestartReasons[:], reason); i >= 0 {
				e.worker.Add(shm.CounterChromeRestarts+shm.Counter(i), 1)
			}
			e.log.Info().Str("reason", reason).Msg("chrome renderer: browser retired; a new one starts for the next render")
		},
	}
}

// idleCloser is a renderer that keeps connections (render.HTTP).
type idleCloser interface{ CloseIdleConnections() }

// get returns the renderer, rebuilt if a reload changed render.*. The renderer it replaces
// closes its idle connections (renders still running on it finish on theirs). A reload whose
// renderer cannot be built keeps the previous one, and says so once.
func (r *renderers) get() render.Renderer {
	cur := r.e.cur.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur == r.cur {
		return r.rdr
	}
	changed := !reflect.DeepEqual(cur.Config().Render, r.cur.Config().Render)
	r.cur = cur
	if !changed {
		return r.rdr
	}
	rdr, err := r.build(cur.Config().Render)
	if err != nil {
		r.e.log.Error().Err(err).Msg("the reloaded configuration's renderer; keeping the previous one")
		return r.rdr
	}
	if c, ok := r.rdr.(idleCloser); ok {
		c.CloseIdleConnections()
	}
	if c, ok := r.rdr.(io.Closer); ok {
		go c.Close() // a browser: it closes once the renders still running on it end
	}
	r.rdr = rdr
	return r.rdr
}

func (p *renderPool) renderLoop(claimCtx, renderCtx context.Context, out chan<- pending) {
	e := p.e
	idle := idleMin
	for claimCtx.Err() == nil {
		jobs, err := p.claimer.Claim(claimCtx, claimBatch)
		claimedAt := time.Now()
		// Work queued behind leased rows is not a failure, nor "nothing to do": claim again
		// soon, without a warning and without backing off further.
		queued := errors.Is(err, claim.ErrQueuedBehindLeases)
		if err != nil && !queued && claimCtx.Err() == nil {
			e.log.Warn().Err(err).Msg("claim failed; backing off")
		}
		if len(jobs) == 0 {
			if queued {
				idle = idleMin
			}
			select {
			case <-claimCtx.Done():
			case <-time.After(idle):
			}
			idle = min(2*idle, idleMax)
			continue
		}
		idle = idleMin
		for _, j := range jobs {
			if claimCtx.Err() != nil { // stopping: a job not begun goes back at once
				j.ReleaseHost(e.seg.Leases(), nowMs())
				p.giveBack(j.Lease)
				continue
			}
			res, ok := p.check.renderJob(renderCtx, e, p.rdrs.get(), j)
			// The host's slot is free once its render ends: the result's delivery and commit
			// are not the host's load.
			j.ReleaseHost(e.seg.Leases(), nowMs())
			if !ok { // cancelled at the drain bound
				p.giveBack(j.Lease)
				continue
			}
			p.queue(renderCtx, out, pending{Result: res, claimedAt: claimedAt})
		}
	}
}

// queue hands a result to the delivery. Should worker 0 be slow to take results, the queue
// stays full; past the drain bound (renderCtx's end) the result is given up and its lease
// given back, rather than holding the stop past its bound.
func (p *renderPool) queue(renderCtx context.Context, out chan<- pending, r pending) {
	select {
	case out <- r:
		return
	default:
	}
	select {
	case out <- r:
	case <-renderCtx.Done():
		p.giveBack(shm.Lease{Slot: r.Lease.Slot, State: r.Lease.State, KeyHash: r.Lease.KeyHash})
	}
}

// giveBack gives a job back without a result: its lease ends now, with no grace, so the row is
// claimable at once (here or after a restart), and the give-back is counted.
func (p *renderPool) giveBack(l shm.Lease) {
	p.e.seg.Leases().Release(l, nowMs(), 0)
	p.e.worker.Add(shm.CounterReleasedUnrendered, 1)
	p.released.Add(1)
}

// renderJob renders one job, conditionally when v is set (render.Request.Validators). It
// reports false, and counts nothing, if the render was cut short by ctx's end (the drain bound): it did not finish, and its lease must be given back. A render
// that finished as ctx ended is kept: what counts is its outcome (a cut render is
// outcome.Timeout), not whether ctx has ended since.
func renderJob(ctx context.Context, e *env, rdr render.Renderer, j claim.Job, v *render.Validators) (wire.Result, bool) {
	device, url, _ := cachekey.Split(j.Key)
	// The cache epoch an operator's rush or recache raised (worker 0's block): a chrome
	// renderer clears its browser's cache once when it sees a new one.
	res := rdr.Render(ctx, render.Request{Key: j.Key, URL: url, Device: device, CacheEpoch: e.seg.CacheEpoch(), Validators: v})
	if tm := res.Timings; tm != nil {
		e.log.Debug().Str("url", url).Str("device", device).Str("outcome", res.Outcome.String()).Dur("response", tm.Response).
			Dur("load", tm.Load).Dur("ready", tm.Ready).Dur("captured", tm.Captured).Int("blocked", tm.Blocked).Msg("chrome render")
	}
	if res.Outcome == outcome.Timeout && ctx.Err() != nil {
		return wire.Result{}, false
	}
	if i := int(res.Outcome) - 1; i >= 0 && i < shm.NumRenderOutcomes {
		e.worker.Add(shm.CounterRenderOutcome+shm.Counter(i), 1)
	}
	e.worker.Observe(shm.CounterRenderSeconds, shm.RenderSecondsBuckets[:], res.Duration.Seconds(), 1e6)
	return wire.Result{
		Key: j.Key, Outcome: res.Outcome.String(), Status: res.Status, Stage: res.Stage,
		DurationMs: res.Duration.Milliseconds(), Headers: res.Headers, Body: res.Body, Err: res.Err,
		Lease:   wire.Lease{Slot: j.Lease.Slot, State: j.Lease.State, KeyHash: j.Lease.KeyHash},
		Signals: wireSignals(res.Signals),
	}, true
}

// wireSignals is a render's signals for worker 0, trimmed to the bounds wire.Validate holds
// them to (render.MaxEvidence lines of render.MaxEvidenceLen bytes), so that a renderer's
// overlong evidence never costs the result its delivery; nil for a renderer that gives none.
func wireSignals(s *render.Signals) *wire.Signals {
	if s == nil {
		return nil
	}
	out := &wire.Signals{Exceptions: max(s.Exceptions, 0), FailedRequests: max(s.FailedRequests, 0),
		PendingRequests: max(s.PendingRequests, 0), Cold: s.Cold}
	for _, line := range s.Evidence[:min(len(s.Evidence), render.MaxEvidence)] {
		if len(line) > render.MaxEvidenceLen {
			n := render.MaxEvidenceLen
			for n > 0 && !utf8.RuneStart(line[n]) {
				n--
			}
			line = line[:n]
		}
		out.Evidence = append(out.Evidence, line)
	}
	return out
}

// conditionalCheck is a render worker's cheaper check: before rendering a page whose row says
// its origin sent validators (claim.Job.Checkable), ask worker 0 whether it may be checked
// instead (wire.Validators: the validators, and whether its bounds allow a check), and if so
// ask the origin with a conditional GET; a 304 is the result, an ok with status 304 and no
// body, which worker 0 applies as "unchanged, verified now". With the http renderer the
// conditional GET is the render (a changed page is fetched once); with another, any answer but
// a 304, or a failure to ask, renders the page in full.
type conditionalCheck struct {
	client *wire.Client

	mu      sync.Mutex
	render  *config.Render  // what checker was built from; nil: not built yet
	checker *render.Checker // render.* in force (render.domains, the timeout, the user agents)
}

// checkerFor is the checker of the render settings in force, rebuilt when a reload changed
// render.*, as the renderer is (renderers.get): a domain a reload took out of render.domains is
// not checked either.
func (c *conditionalCheck) checkerFor(e *env) *render.Checker {
	rc := &e.cur.Load().Config().Render
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checker == nil || (c.render != rc && !reflect.DeepEqual(*c.render, *rc)) {
		c.checker = render.NewChecker(assemble.RenderOptions(*rc))
	}
	c.render = rc
	return c.checker
}

// validatorsTimeout bounds the question to worker 0 before a render.
const validatorsTimeout = 2 * time.Second

// renderJob renders j with rdr, asking worker 0 first, for a checkable job, whether the origin may
// be asked conditionally (c nil: never). A ConditionalRenderer (the http renderer) then renders
// with the validators: its one GET is the check, and a 304 or the changed page its result. Any
// other renderer is checked first (render.Checker) and renders in full unless the origin
// answered 304. It reports false as renderJob does, for a render cut short by ctx's end.
func (c *conditionalCheck) renderJob(ctx context.Context, e *env, rdr render.Renderer, j claim.Job) (wire.Result, bool) {
	v := c.ask(ctx, j)
	if v == nil {
		return renderJob(ctx, e, rdr, j, nil)
	}
	if _, ok := rdr.(render.ConditionalRenderer); ok {
		return renderJob(ctx, e, rdr, j, v)
	}
	start := time.Now()
	device, url, _ := cachekey.Split(j.Key)
	cr, err := c.checkerFor(e).NotModified(ctx, url, device, v.ETag, v.LastModified)
	if err != nil || !cr.NotModified {
		e.log.Debug().Str("url", url).Int("status", cr.Status).AnErr("error", err).Msg("conditional check: render in full")
		return renderJob(ctx, e, rdr, j, nil)
	}
	return wire.Result{
		Key: j.Key, Outcome: outcome.OK.String(), Status: 304, Stage: render.StageHeaders,
		DurationMs: time.Since(start).Milliseconds(), Headers: cr.Headers,
		Lease: wire.Lease{Slot: j.Lease.Slot, State: j.Lease.State, KeyHash: j.Lease.KeyHash},
	}, true
}

// ask returns the validators j's page may be checked with, or nil when it is rendered in full
// without asking the origin conditionally: c is nil, the job is not checkable, or worker 0
// refused or did not answer.
func (c *conditionalCheck) ask(ctx context.Context, j claim.Job) *render.Validators {
	if c == nil || !j.Checkable {
		// The question costs worker 0 a request and a read of the target: asked before every
		// render, it halved what a node renders per second.
		return nil
	}
	vctx, cancel := context.WithTimeout(ctx, validatorsTimeout)
	v, err := c.client.Validators(vctx, j.Key)
	cancel()
	if err != nil || !v.Check {
		return nil
	}
	return &render.Validators{ETag: v.ETag, LastModified: v.LastModified}
}

// senders is how many result batches one of workers-1 render workers keeps in flight: together
// about batchesInFlight, at least one each. Worker 0 acknowledges a batch only once it has
// committed; with one batch in flight it would idle through every commit, and with many, the
// results queued behind them would hold leases for nothing.
func senders(workers int) int {
	renderers := max(1, workers-1)
	return max(1, (batchesInFlight+renderers-1)/renderers)
}

// resultSender is worker 0's side of a delivery (wire.Client).
type resultSender interface {
	SendResults(ctx context.Context, results []wire.Result) (wire.ApplyStats, error)
}

// deliver sends results to worker 0 in batches until in is closed and drained, with up to
// inFlight batches in flight: worker 0 decides one batch while the funnel commits another,
// instead of idling through each commit. A batch holds at most resultBatch results and
// resultBatchBytes of them (a larger result goes alone). A batch worker 0 cannot take is
// retried with backoff for resultRetryLimit, or until flush ends (the flush bound of a stop),
// then dropped. Each delivered job's claim-to-result latency is observed when worker 0
// acknowledges its commit.
func deliver(e *env, client resultSender, in <-chan pending, inFlight int, flush context.Context) {
	free := make(chan []pending, inFlight)
	for range inFlight {
		free <- make([]pending, 0, resultBatch)
	}
	full := make(chan []pending)
	var sending sync.WaitGroup
	for range inFlight {
		sending.Add(1)
		go func() {
			defer sending.Done()
			out := make([]wire.Result, 0, resultBatch)
			for batch := range full {
				out = out[:0]
				for _, p := range batch {
					out = append(out, p.Result)
				}
				send(e, client, batch, out, flush)
				clear(out)
				clear(batch)
				free <- batch[:0]
			}
		}()
	}
	defer sending.Wait()
	defer close(full)
	var carry *pending // the result that did not fit the previous batch
	for {
		if carry == nil {
			p, ok := <-in
			if !ok {
				return
			}
			carry = &p
		}
		batch := append(<-free, *carry)
		size := resultSize(&carry.Result)
		carry = nil
		linger := time.NewTimer(resultLinger)
	fill:
		for len(batch) < resultBatch && size < resultBatchBytes {
			select {
			case p, ok := <-in:
				if !ok {
					break fill
				}
				if n := resultSize(&p.Result); size+n > resultBatchBytes {
					carry = &p
					break fill
				} else {
					size += n
				}
				batch = append(batch, p)
			case <-linger.C:
				break fill
			}
		}
		linger.Stop()
		full <- batch
	}
}

// resultSize is about the bytes a result takes in a binary batch.
func resultSize(r *wire.Result) int {
	n := 64 + len(r.Key) + len(r.Outcome) + len(r.Stage) + len(r.Body) + len(r.Err)
	for k, v := range r.Headers {
		n += 4 + len(k) + len(v)
	}
	return n
}

// send delivers one batch, retrying a transient failure for resultRetryLimit, each attempt
// bounded by 10 s and by flush: once flush ends (the flush bound of a stop), the attempt in
// progress is cut and the batch given up. A 4xx is final: worker 0 refused these results for
// good (400, 413: it will not take them; 409: their leases are no longer this worker's), so
// they are dropped at once, not retried. Every batch given up is dropped (dropBatch).
func send(e *env, client resultSender, batch []pending, out []wire.Result, flush context.Context) {
	deadline := time.Now().Add(resultRetryLimit)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		ctx, cancel := context.WithTimeout(flush, 10*time.Second)
		_, err := client.SendResults(ctx, out)
		cancel()
		if err == nil {
			acked := time.Now()
			for _, p := range batch {
				e.worker.Observe(shm.CounterResultLatency, shm.ResultLatencyBuckets[:], acked.Sub(p.claimedAt).Seconds(), 1e6)
			}
			return
		}
		var refused *wire.StatusError
		if errors.As(err, &refused) && refused.Code/100 == 4 {
			dropBatch(e, batch, err, "worker 0 refused the results; dropped, not retried")
			return
		}
		if flush.Err() != nil || time.Now().Add(wait).After(deadline) {
			dropBatch(e, batch, err, "results undeliverable; dropped")
			return
		}
		select {
		case <-time.After(wait):
		case <-flush.Done():
		}
	}
}

// dropBatch gives up on a batch: its results are counted as dropped, and their leases are
// released at once, so that the rows render again without waiting a TTL. A release is a CAS
// from the exact grant, so a lease worker 0 has already ended (a 409, or a commit whose answer
// was lost) or granted anew is left alone; the log says how many were released.
func dropBatch(e *env, batch []pending, err error, msg string) {
	e.worker.Add(shm.CounterResultsDropped, uint64(len(batch)))
	released := 0
	for _, p := range batch {
		if e.seg.Leases().Release(shm.Lease{Slot: p.Lease.Slot, State: p.Lease.State, KeyHash: p.Lease.KeyHash}, nowMs(), 0) {
			released++
		}
	}
	ev := e.log.Error().Err(err).Int("results", len(batch)).Int("released", released)
	var refused *wire.StatusError
	if errors.As(err, &refused) {
		ev = ev.Int("status", refused.Code)
	}
	ev.Msg(msg)
}
