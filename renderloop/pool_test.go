package renderloop

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

func testEnv(t *testing.T) *Deps {
	t.Helper()
	seg, err := shm.Create(filepath.Join(t.TempDir(), "seg"), shm.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	w, err := seg.Worker(1)
	if err != nil {
		t.Fatal(err)
	}
	var cur atomic.Pointer[config.Config]
	cur.Store(config.Default())
	e := &Deps{Index: 1, Holder: uint64(os.Getpid())<<16 | 1, Log: zerolog.Nop(), Seg: seg, Worker: w, Now: nowMs,
		Settings: func() Settings {
			cfg := cur.Load()
			// The http renderer's concurrency does not depend on the cores: 1 stands for any.
			return Settings{Concurrency: cfg.RenderConcurrency(1), Renderer: cfg.Render.Renderer,
				ShutdownTimeout: cfg.Supervisor.ShutdownTimeout.D(), Render: &cfg.Render}
		},
		NewChecker: func(r any) *render.Checker { return render.NewChecker(assemble.RenderOptions(*r.(*config.Render))) },
	}
	configs.Store(e, &cur)
	return e
}

// configs is each test Deps' configuration in force, which setConfig replaces as a reload does.
var configs sync.Map // *Deps → *atomic.Pointer[config.Config]

// setConfig puts cfg in force for e, as a reload would.
func setConfig(e *Deps, cfg *config.Config) error {
	c, _ := configs.Load(e)
	c.(*atomic.Pointer[config.Config]).Store(cfg)
	return nil
}

// currentConfig is the configuration in force for e.
func currentConfig(e *Deps) *config.Config {
	c, _ := configs.Load(e)
	return c.(*atomic.Pointer[config.Config]).Load()
}

func nowMs() int64 { return clock.NowMs() }

// gatedSender is worker 0 as a test controls it: each call reports itself on calls, then
// blocks until the test lets it through on release.
type gatedSender struct {
	calls   chan []wire.Result
	release chan struct{}
	mu      sync.Mutex
	got     map[string]int
}

func (g *gatedSender) SendResults(_ context.Context, rs []wire.Result) (wire.ApplyStats, error) {
	g.mu.Lock()
	for _, r := range rs {
		g.got[string(r.Key)]++
	}
	g.mu.Unlock()
	g.calls <- rs
	<-g.release
	return wire.ApplyStats{Applied: len(rs)}, nil
}

// Worker 0 answers a batch only once it has committed, and while the funnel commits one batch
// it could be deciding the next. So a render worker keeps several batches in flight
// rather than waiting for each acknowledgement before sending the next.
func TestDeliverKeepsSeveralBatchesInFlight(t *testing.T) {
	const inFlight = 3
	const total = (inFlight + 1) * resultBatch
	e := testEnv(t)
	g := &gatedSender{calls: make(chan []wire.Result), release: make(chan struct{}), got: map[string]int{}}
	in := make(chan pending)
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		deliver(e, g, in, inFlight, context.Background())
	}()
	go func() {
		for i := range total {
			in <- pending{Result: wire.Result{Key: fmt.Appendf(nil, "desktop|https://shop.test/%d", i), Outcome: "ok"}, claimedAt: time.Now()}
		}
		close(in)
	}()
	// inFlight calls arrive while none has been answered. (The deadline only bounds how long a
	// failure takes to show; a passing run never waits for it.)
	for i := range inFlight {
		select {
		case <-g.calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d batches in flight, want %d", i, inFlight)
		}
	}
	// Answer everything from here on; every result is delivered exactly once.
	close(g.release)
	go func() {
		for range g.calls {
		}
	}()
	<-delivered
	close(g.calls)
	if len(g.got) != total {
		t.Fatalf("%d distinct results delivered, want %d", len(g.got), total)
	}
	for k, n := range g.got {
		if n != 1 {
			t.Fatalf("%s delivered %d times", k, n)
		}
	}
	observed := uint64(0)
	for i := range len(shm.ResultLatencyBuckets) + 1 {
		observed += e.Worker.Load(shm.CounterResultLatency + shm.Counter(i))
	}
	if observed != total {
		t.Fatalf("claim-to-result latency observed for %d results, want %d", observed, total)
	}
}

// Worker 0 is given about batchesInFlight batches at once whatever the number of render
// workers: a lone render worker keeps them all in flight, and many keep one each, so that the
// results queued behind the batches (each holding its lease) stay few.
func TestSendersShareTheBatchesInFlight(t *testing.T) {
	for _, c := range []struct{ workers, want int }{{1, 3}, {2, 3}, {3, 2}, {4, 1}, {9, 1}} {
		if got := senders(c.workers); got != c.want {
			t.Errorf("senders(%d) = %d, want %d", c.workers, got, c.want)
		}
	}
}

// Every rendered result a render worker holds (queued, batched or in flight to worker 0) holds
// its lease, and all render workers share one lease table (queue.max_leases, 4096 by default).
// At zero render latency the results pile up behind worker 0, so together they must leave most
// of the table to the claims: with a queue of 1024 results a render worker, four workers held
// nearly the whole table and the grants refused 12,726 takes as "full" in a 50,000-job run,
// each refused take losing its ready entry until the next sweep.
func TestHeldResultsLeaveTheLeaseTableToClaims(t *testing.T) {
	const maxLeases, concurrency = 4096, 16 // the defaults, and the benchmark's concurrency
	for workers := 2; workers <= 4; workers++ {
		perWorker := resultQueue + senders(workers)*resultBatch + concurrency*claimBatch
		if held := (workers - 1) * perWorker; held > maxLeases/2 {
			t.Errorf("%d workers hold up to %d leases in results, over half of %d", workers, held, maxLeases)
		}
	}
}

// A render worker asks worker 0 for a conditional check only for a job whose row says its
// origin sent validators: the question costs worker 0 a request and a read of the target, and
// asked before every render it halved what a node rendered per second.
func TestConditionalCheckAsksOnlyForCheckableJobs(t *testing.T) {
	var asked atomic.Int64
	client := validatorsServer(t, func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"check": false}`) // render in full: the test needs no origin
	})

	c := &conditionalCheck{client: client}
	key := []byte("desktop|https://a.test/p/1")
	for _, tc := range []struct {
		checkable bool
		wantAsked int64
	}{{false, 0}, {true, 1}, {false, 1}, {true, 2}} {
		if v := c.ask(context.Background(), claim.Job{Key: key, Checkable: tc.checkable}); v != nil {
			t.Fatalf("checkable %v: a check was taken although worker 0 refused it", tc.checkable)
		}
		if got := asked.Load(); got != tc.wantAsked {
			t.Fatalf("after a job with checkable %v: worker 0 was asked %d times, want %d", tc.checkable, got, tc.wantAsked)
		}
	}
}
