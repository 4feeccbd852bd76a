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

func (o *oneFallback) ClaimIndex(ctx context.Context, n int, holder uint64) ([]claim.Job, error) {
	select {
	case o.slot <- struct{}{}:
		defer func() { <-o.slot }()
		return o.Fallback.ClaimIndex(ctx, n, holder)
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
	results := make(chan pending, 4*resultBatch)
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		deliver(e, client, results)
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

// deliver sends results to worker 0 in batches until in is closed and drained. A batch worker 0
// cannot take is retried with backoff for resultRetryLimit, then dropped and counted. Each
// delivered job's claim-to-result latency is observed when worker 0 acknowledges its commit.
func deliver(e *env, client *api.Client, in <-chan pending) {
	batch := make([]pending, 0, resultBatch)
	wire := make([]api.Result, 0, resultBatch)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		wire = wire[:0]
		for _, p := range batch {
			wire = append(wire, p.Result)
		}
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
				break
			}
			if time.Now().Add(wait).After(deadline) {
				e.worker.Add(shm.CounterResultsDropped, uint64(len(batch)))
				e.log.Error().Err(err).Int("results", len(batch)).
					Msg("results undeliverable; dropped (their leases lapse and the rows render again)")
				break
			}
			time.Sleep(wait)
		}
		batch = batch[:0]
	}
	for {
		p, ok := <-in
		if !ok {
			flush()
			return
		}
		batch = append(batch, p)
		linger := time.NewTimer(resultLinger)
	fill:
		for len(batch) < resultBatch {
			select {
			case p, ok := <-in:
				if !ok {
					linger.Stop()
					flush()
					return
				}
				batch = append(batch, p)
			case <-linger.C:
				break fill
			}
		}
		linger.Stop()
		flush()
	}
}
