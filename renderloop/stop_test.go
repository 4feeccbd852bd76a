package renderloop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/testkit/timers"
	"github.com/freshq/freshq/wire"
)

// leasingClaimer hands out jobs without end, each under a real lease of the test's segment.
type leasingClaimer struct {
	e       *Deps
	next    atomic.Int64
	mu      sync.Mutex
	granted []shm.Lease
}

func (c *leasingClaimer) Claim(ctx context.Context, n int) ([]claim.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var jobs []claim.Job
	for range n {
		key := fmt.Appendf(nil, "desktop|https://shop.test/%d", c.next.Add(1))
		l, st := c.e.Seg.Leases().Acquire(shm.KeyHash(key), nowMs(), 600_000, c.e.Holder)
		if st != shm.Acquired {
			break
		}
		c.mu.Lock()
		c.granted = append(c.granted, l)
		c.mu.Unlock()
		jobs = append(jobs, claim.Job{Key: key, KeyHash: l.KeyHash, Lease: l})
	}
	return jobs, nil
}

func (c *leasingClaimer) leases() []shm.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]shm.Lease(nil), c.granted...)
}

// instantRenderer renders every page at once, counting its renders.
type instantRenderer struct{ renders atomic.Int64 }

func (r *instantRenderer) Render(_ context.Context, req render.Request) render.Result {
	r.renders.Add(1)
	return render.Result{Outcome: outcome.OK, Status: 200, Stage: render.StageBody, Body: []byte("<html>" + req.URL + "</html>")}
}

// stuckWorker0 takes no result: each delivery waits until its context ends. The first batch
// it is sent is reported on first; an attempt that ended on its own timeout rather than by
// the flush bound is counted in timedOut.
type stuckWorker0 struct {
	calls    atomic.Int64
	timedOut atomic.Int64
	first    chan int
}

func (s *stuckWorker0) SendResults(ctx context.Context, rs []wire.Result) (wire.ApplyStats, error) {
	if s.calls.Add(1) == 1 {
		s.first <- len(rs)
	}
	<-ctx.Done()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		s.timedOut.Add(1)
	}
	return wire.ApplyStats{}, fmt.Errorf("%w: %w", wire.ErrUnavailable, ctx.Err())
}

func poolEnv(t *testing.T, concurrency int) *Deps {
	e := testEnv(t)
	cfg := config.Default()
	cfg.Render.Concurrency = concurrency
	cfg.Supervisor.ShutdownTimeout = config.Duration(7 * time.Second)
	if err := setConfig(e, cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

// A worker 0 that takes no result must not hold a render worker past its bounds: with the
// queue full and render loops waiting to queue their results, the drain bound gives those
// results' leases back, and the flush bound cuts the delivery in progress and drops what is
// left, releasing every lease. Both bounds are asked for at the stop, timed from it; the test
// fires them itself, so no time has to pass.
func TestStopWithinBoundsWhileWorker0IsSlow(t *testing.T) {
	const concurrency = 2
	e := poolEnv(t, concurrency)
	claimer := &leasingClaimer{e: e}
	rdr := &instantRenderer{}
	w0 := &stuckWorker0{first: make(chan int, 1)}
	after, asked := timers.New()
	p := &renderPool{e: e, claimer: claimer, rdrs: &renderers{e: e, cur: e.Settings().Render, rdr: rdr}, sender: w0, inFlight: 1, after: after}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	returned := make(chan struct{})
	go func() { defer close(returned); p.run(ctx) }()

	// Let the pipeline fill: the batch worker 0 holds, the one result deliver holds while it
	// waits for a free batch, the queue, and then at least one render loop holding a rendered
	// result it cannot queue.
	var inFlight int
	select {
	case inFlight = <-w0.first:
	case <-time.After(10 * time.Second):
		t.Fatal("no batch was sent")
	}
	full := make(chan struct{})
	go func() {
		defer close(full)
		for rdr.renders.Load() < int64(inFlight+1+resultQueue+1) {
			time.Sleep(time.Millisecond) // waiting for a condition, not for time to pass
		}
	}()
	timers.Within(t, "a render loop blocked on a full queue", full)

	stop()
	var drain, flush timers.Timer
	for i, tm := range []*timers.Timer{&drain, &flush} {
		select {
		case *tm = <-asked:
		case <-time.After(10 * time.Second):
			t.Fatalf("bound %d was not asked for at the stop", i)
		}
	}
	if drain.D != 7*time.Second || flush.D != drain.D+renderFlushTimeout {
		t.Fatalf("bounds %v and %v from the stop, want shutdown_timeout (7s) and %v more", drain.D, flush.D, renderFlushTimeout)
	}
	close(drain.Fire)
	givenBack := make(chan struct{})
	go func() {
		defer close(givenBack)
		for p.released.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
	}()
	timers.Within(t, "the blocked loop giving its result's lease back at the drain bound", givenBack)
	close(flush.Fire)
	timers.Within(t, "the stop, once the flush bound passed", returned)

	granted := claimer.leases()
	dropped := e.Worker.Load(shm.CounterResultsDropped)
	released := e.Worker.Load(shm.CounterReleasedUnrendered)
	t.Logf("%d granted, %d rendered, %d dropped, %d given back unrendered, %d delivery attempts",
		len(granted), rdr.renders.Load(), dropped, released, w0.calls.Load())
	if n := w0.timedOut.Load(); n != 0 {
		t.Fatalf("%d delivery attempts ran to their own timeout instead of ending at the flush bound", n)
	}
	if dropped+released != uint64(len(granted)) || dropped < uint64(inFlight) {
		t.Fatalf("%d granted, but %d dropped + %d given back", len(granted), dropped, released)
	}
	for _, l := range granted {
		if info, ok := e.Seg.Leases().Lookup(l.KeyHash, nowMs()); ok && !info.Released {
			t.Fatalf("a lease outlived the stop: %+v", info)
		}
	}
}

// A render that finished just as the drain bound passed is a result like any other: its
// outcome says it finished. Only a render the bound cut short (outcome.Timeout) is given back.
func TestRenderFinishedAtTheDrainBoundIsKept(t *testing.T) {
	e := poolEnv(t, 1)
	job := claim.Job{Key: []byte("desktop|https://shop.test/a")}
	ctx, cancel := context.WithCancel(context.Background())
	finished := rendererFunc(func(context.Context, render.Request) render.Result {
		cancel() // the drain bound passes as the render returns
		return render.Result{Outcome: outcome.OK, Status: 200, Stage: render.StageBody, Body: []byte("<html></html>")}
	})
	res, ok := renderJob(ctx, e, finished, job, nil)
	if !ok || res.Outcome != outcome.OK.String() {
		t.Fatalf("a finished render was thrown away: %v %+v", ok, res)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cut := rendererFunc(func(context.Context, render.Request) render.Result {
		cancel()
		return render.Result{Outcome: outcome.Timeout, Stage: render.StageHeaders, Err: "canceled during headers"}
	})
	if _, ok := renderJob(ctx, e, cut, job, nil); ok {
		t.Fatal("a render cut short by the drain bound was kept")
	}
}

type rendererFunc func(context.Context, render.Request) render.Result

func (f rendererFunc) Render(ctx context.Context, req render.Request) render.Result {
	return f(ctx, req)
}
