package main

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/shm"
)

const (
	claimBatch       = 4                    // jobs per claim: one fallback round trip serves several renders
	resultBatch      = 256                  // results per delivery at most
	resultQueue      = resultBatch / 4      // results rendered and waiting for a batch
	batchesInFlight  = 3                    // result batches worker 0 is given at once, by all render workers
	resultLinger     = 5 * time.Millisecond // how long a partial batch waits for company
	resultRetryLimit = 30 * time.Second     // then the batch is dropped: its leases lapse and the rows render again
	idleMin, idleMax = 20 * time.Millisecond, time.Second
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
	api.Result
	claimedAt time.Time
}

// runRenderWorker is workers 1..N-1: render.concurrency loops of claim, render, report.
func runRenderWorker(ctx context.Context, e *env) error {
	cfg := e.pol.Load().Config()
	rdr, err := render.New(cfg.Render, render.WithStream(uint64(e.index)))
	if err != nil {
		return wrap("renderer", err)
	}
	client := api.NewClient(e.socketPath)
	fallback := &oneFallback{Fallback: client, slot: make(chan struct{}, 1)}
	claimer := claim.New(claim.Options{Segment: e.seg, Worker: e.worker, Fallback: fallback, Policy: e.pol.Load, Now: nowMs, Holder: e.holder()})

	// Renders in flight may finish after SIGTERM, within shutdown_timeout; claiming stops at once.
	renderCtx, cancelRenders := context.WithCancel(context.Background())
	defer cancelRenders()
	// Every result waiting here holds its lease, and the lease table (queue.max_leases) is
	// shared by all render workers: the queue is kept short, and the batches in flight are
	// shared out between the render workers.
	results := make(chan pending, resultQueue)
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		deliver(e, client, results, senders(int(e.seg.Layout().Workers)))
	}()

	var wg sync.WaitGroup
	for range cfg.Render.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			renderLoop(ctx, renderCtx, e, claimer, rdr, results)
		}()
	}
	e.log.Info().Int("concurrency", cfg.Render.Concurrency).Str("renderer", cfg.Render.Renderer).Msg("render worker started")

	<-ctx.Done()
	drain := e.pol.Load().Config().Supervisor.ShutdownTimeout.D()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(drain):
		e.log.Warn().Dur("shutdown_timeout", drain).Msg("renders still in flight at the drain bound; abandoning them (their leases lapse)")
		cancelRenders()
		<-finished
	}
	close(results)
	<-delivered
	return nil
}

func renderLoop(claimCtx, renderCtx context.Context, e *env, c *claim.Claimer, rdr render.Renderer, out chan<- pending) {
	idle := idleMin
	for claimCtx.Err() == nil {
		jobs, err := c.Claim(claimCtx, claimBatch)
		claimedAt := time.Now()
		if err != nil && claimCtx.Err() == nil {
			e.log.Warn().Err(err).Msg("claim failed; backing off")
		}
		if len(jobs) == 0 {
			select {
			case <-claimCtx.Done():
			case <-time.After(idle):
			}
			idle = min(2*idle, idleMax)
			continue
		}
		idle = idleMin
		for _, j := range jobs {
			out <- pending{Result: renderJob(renderCtx, e, rdr, j), claimedAt: claimedAt}
		}
	}
}

func renderJob(ctx context.Context, e *env, rdr render.Renderer, j claim.Job) api.Result {
	device, url, ok := strings.Cut(string(j.Key), "|")
	if !ok {
		device, url = "", string(j.Key)
	}
	res := rdr.Render(ctx, render.Request{Key: j.Key, URL: url, Device: device})
	if i := int(res.Outcome) - 1; i >= 0 && i < shm.NumRenderOutcomes {
		e.worker.Add(shm.CounterRenderOutcome+shm.Counter(i), 1)
	}
	e.worker.Observe(shm.CounterRenderSeconds, shm.RenderSecondsBuckets[:], res.Duration.Seconds(), 1e6)
	return api.Result{
		Key: j.Key, Outcome: res.Outcome.String(), Status: res.Status, Stage: res.Stage,
		DurationMs: res.Duration.Milliseconds(), Headers: res.Headers, Body: res.Body, Err: res.Err,
		Lease: api.Lease{Slot: j.Lease.Slot, State: j.Lease.State, KeyHash: j.Lease.KeyHash},
	}
}

// senders is how many result batches one of workers-1 render workers keeps in flight: together
// about batchesInFlight, at least one each. Worker 0 acknowledges a batch only once it has
// committed; with one batch in flight it would idle through every commit, and with many, the
// results queued behind them would hold leases for nothing.
func senders(workers int) int {
	renderers := max(1, workers-1)
	return max(1, (batchesInFlight+renderers-1)/renderers)
}

// resultSender is worker 0's side of a delivery (api.Client).
type resultSender interface {
	SendResults(ctx context.Context, results []api.Result) (api.ApplyStats, error)
}

// deliver sends results to worker 0 in batches until in is closed and drained, with up to
// inFlight batches in flight: worker 0 decides one batch while the funnel commits another,
// instead of idling through each commit. A batch worker 0 cannot take is retried with backoff
// for resultRetryLimit, then dropped and counted. Each delivered job's claim-to-result latency
// is observed when worker 0 acknowledges its commit.
func deliver(e *env, client resultSender, in <-chan pending, inFlight int) {
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
			wire := make([]api.Result, 0, resultBatch)
			for batch := range full {
				wire = wire[:0]
				for _, p := range batch {
					wire = append(wire, p.Result)
				}
				send(e, client, batch, wire)
				clear(wire)
				clear(batch)
				free <- batch[:0]
			}
		}()
	}
	defer sending.Wait()
	defer close(full)
	for {
		p, ok := <-in
		if !ok {
			return
		}
		batch := append(<-free, p)
		linger := time.NewTimer(resultLinger)
	fill:
		for len(batch) < resultBatch {
			select {
			case p, ok := <-in:
				if !ok {
					break fill
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

// send delivers one batch, retrying for resultRetryLimit.
func send(e *env, client resultSender, batch []pending, wire []api.Result) {
	deadline := time.Now().Add(resultRetryLimit)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := client.SendResults(ctx, wire)
		cancel()
		if err == nil {
			acked := time.Now()
			for _, p := range batch {
				e.worker.Observe(shm.CounterResultLatency, shm.ResultLatencyBuckets[:], acked.Sub(p.claimedAt).Seconds(), 1e6)
			}
			return
		}
		if time.Now().Add(wait).After(deadline) {
			e.worker.Add(shm.CounterResultsDropped, uint64(len(batch)))
			e.log.Error().Err(err).Int("results", len(batch)).
				Msg("results undeliverable; dropped (their leases lapse and the rows render again)")
			return
		}
		time.Sleep(wait)
	}
}
