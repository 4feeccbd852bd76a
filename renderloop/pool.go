package renderloop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/internal/startstop"
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

// Service is a render worker (workers 1..N-1) as a startstop.Service: render.concurrency loops
// of claim, render, report.
//
// Start builds the renderer and the claimer, gives back the host slots of this worker's dead
// incarnations, and runs the pool, which claims only once worker 0 serves. Stop (or the end of
// Start's ctx) stops it: it stops claiming at once and gives back, without rendering them, the
// jobs it had claimed but not begun; it waits for the renders in flight up to
// supervisor.shutdown_timeout and cancels the rest, giving their leases back too (no grace: the
// rows are claimable at once, not after a TTL); then it delivers every result it holds to
// worker 0, which the supervisor stops only after this worker has exited, and closes the
// renderer. A lease given back is counted (shm.CounterReleasedUnrendered), never silently
// dropped. The whole stop takes at most shutdown_timeout + renderFlushTimeout, whatever worker
// 0 does (see renderPool.run).
type Service struct {
	startstop.BaseStartStop
	e *Deps
}

// New is the render worker of e.
func New(e *Deps) *Service { return &Service{e: e} }

// Start starts the render worker; an error (a renderer that cannot be built) leaves nothing
// running.
func (s *Service) Start(ctx context.Context) error {
	e := s.e
	rdrs, err := newRenderers(e)
	if err != nil {
		return fmt.Errorf("renderer: %w", err)
	}
	// The host slots of this worker index's earlier incarnations, killed mid-render, go back now
	// rather than at their leases' TTL (hosts owns the slots and their release).
	hosts.ReleaseEarlierIncarnations(e.Seg, e.Index, e.Holder, e.Now(), e.Log)
	client := wire.NewClient(e.Socket)
	fallback := &oneFallback{Fallback: api.IndexFallback{Client: client}, slot: make(chan struct{}, 1)}
	claimer, err := claim.New(claim.Options{Segment: e.Seg, Worker: e.Worker, Fallback: fallback, Settings: e.Claim, Now: e.Now, Holder: e.Holder,
		Granted: e.Granted})
	if err != nil {
		rdrs.close()
		return fmt.Errorf("claimer: %w", err)
	}
	ctx, start, done := s.StartInit(ctx)
	if !start {
		rdrs.close()
		return nil
	}
	go func() {
		defer done()
		defer rdrs.close() // after the renders: a browser is killed and its profile removed
		if !waitForWorker0(ctx, e, client) {
			return
		}
		p := &renderPool{e: e, claimer: claimer, rdrs: rdrs, sender: client, inFlight: senders(int(e.Seg.Layout().Workers)), after: time.After,
			check: &conditionalCheck{client: client}, farm: newFarmWake(e.Seg)}
		p.run(ctx)
	}()
	return nil
}

var _ startstop.Service = (*Service)(nil)

// jobClaimer is where a render loop claims its jobs (claim.Claimer).
type jobClaimer interface {
	Claim(ctx context.Context, n int) ([]claim.Job, error)
}

// renderPool is a render worker's loops and its delivery to worker 0.
type renderPool struct {
	e        *Deps
	claimer  jobClaimer
	rdrs     *renderers
	sender   resultSender
	inFlight int // result batches in flight at once (senders)
	// after is time.After: the stop's two bounds are timers made with it, so that a test can
	// fire them itself.
	after    func(time.Duration) <-chan time.Time
	released atomic.Int64      // leases given back unrendered
	check    *conditionalCheck // nil: always render
	// farm wakes the loops that back off when the farm words change (nil: none does); idle
	// is the backoff's timer (nil: time.After), which a test may hold.
	farm *farmWake
	idle func(time.Duration) <-chan time.Time
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

	concurrency := e.Settings().Concurrency
	if p.farm != nil {
		go p.farm.run(ctx)
	}
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.renderLoop(ctx, renderCtx, results)
		}()
	}
	e.Log.Info().Int("concurrency", concurrency).Str("renderer", e.Settings().Renderer).Msg("render worker started")

	<-ctx.Done()
	drain := e.Settings().ShutdownTimeout
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
		e.Log.Warn().Dur("shutdown_timeout", drain).Msg("renders still in flight at the drain bound; cancelling them and releasing their leases")
		cancelRenders()
		<-loops
	}
	sender.Stop() // the loops have returned: nothing queues any more
	close(delivered)
	if n := p.released.Load(); n > 0 {
		e.Log.Warn().Int64("released", n).Msg("jobs given back unrendered at the stop; their leases are released and the rows are claimable at once")
	}
}

// waitForWorker0 waits until worker 0 serves (it opens the store first), looking again with a
// growing pause: a render worker that claimed meanwhile would only log failed claims. It
// reports false if ctx ends first.
func waitForWorker0(ctx context.Context, e *Deps, client *wire.Client) bool {
	logged := false
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, worker0Wait) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := client.Status(sctx)
		cancel()
		if err == nil && st.Serving {
			if logged {
				e.Log.Info().Msg("worker 0 serves; claiming")
			}
			return true
		}
		if !logged {
			e.Log.Info().Str("socket", e.Socket).Msg("waiting for worker 0 to serve")
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
	}
}

func (p *renderPool) renderLoop(claimCtx, renderCtx context.Context, out chan<- pending) {
	e := p.e
	idle := idleMin
	idleAfter := p.idle
	if idleAfter == nil {
		idleAfter = time.After
	}
	for claimCtx.Err() == nil {
		// Taken before the claim: a share that grows after the claim read it wakes the loop.
		grown := p.farm.changed()
		jobs, err := p.claimer.Claim(claimCtx, claimBatch)
		claimedAt := time.Now()
		// Work queued behind leased rows is not a failure, nor "nothing to do": claim again
		// soon, without a warning and without backing off further.
		queued := errors.Is(err, claim.ErrQueuedBehindLeases)
		if err != nil && !queued && claimCtx.Err() == nil {
			e.Log.Warn().Err(err).Msg("claim failed; backing off")
		}
		if len(jobs) == 0 {
			if queued {
				idle = idleMin
			}
			select {
			case <-claimCtx.Done():
			case <-idleAfter(idle):
				idle = min(2*idle, idleMax)
			case <-grown:
				// The farm's division changed: a host's share here may have grown. Every loop
				// wakes, one claims from worker 0's index (which asks for a sweep) and the
				// others find nothing yet: they look again soon, and take the entries the sweep
				// publishes, rather than back off for a second with a slot unused.
				idle = idleMin
			}
			continue
		}
		idle = idleMin
		for _, j := range jobs {
			if claimCtx.Err() != nil { // stopping: a job not begun goes back at once
				j.ReleaseHost(e.Seg.Leases(), e.Now())
				p.giveBack(j.Lease)
				continue
			}
			res, ok := p.check.renderJob(renderCtx, e, p.rdrs.get(), j)
			// The host's slot is free once its render ends: the result's delivery and commit
			// are not the host's load.
			j.ReleaseHost(e.Seg.Leases(), e.Now())
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
	p.e.Seg.Leases().Release(l, p.e.Now(), 0)
	p.e.Worker.Add(shm.CounterReleasedUnrendered, 1)
	p.released.Add(1)
}
