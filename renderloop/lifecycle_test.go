package renderloop

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// config may not import the store, so it keeps a copy of the store's page limit, which must be
// the same: above it, a render.max_body the configuration accepts would fail whole result
// batches; below it, the configuration would refuse pages the store keeps.
func TestConfigPageLimitIsTheStores(t *testing.T) {
	if config.MaxPageBody != store.MaxPageBody {
		t.Fatalf("config.MaxPageBody %d, store.MaxPageBody %d: they must be equal", config.MaxPageBody, store.MaxPageBody)
	}
	// A batch fits what worker 0 accepts, and so does one result with the largest page, which
	// goes alone.
	big := wire.Result{Key: make([]byte, 4096), Outcome: "ok", Stage: "body", Err: "x",
		Headers: map[string]string{"content-type": "text/html; charset=utf-8"}, Body: make([]byte, config.MaxPageBody)}
	if resultBatchBytes > wire.MaxResultsBody || len(wire.EncodeResults(nil, []wire.Result{big})) > wire.MaxResultsBody {
		t.Fatalf("a batch (%d) or one largest page (%d) exceeds the results body limit %d", resultBatchBytes, config.MaxPageBody, wire.MaxResultsBody)
	}
}

// recordingSender answers each batch with err after recording it.
type recordingSender struct {
	mu      sync.Mutex
	batches [][]wire.Result
	err     error
}

func (r *recordingSender) SendResults(_ context.Context, rs []wire.Result) (wire.ApplyStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, append([]wire.Result(nil), rs...))
	return wire.ApplyStats{Applied: len(rs)}, r.err
}

// A delivery is cut by bytes, not only by count: big pages go a few at a time, and one larger
// than a batch goes alone.
func TestDeliverCutsBatchesByBytes(t *testing.T) {
	e := testEnv(t)
	r := &recordingSender{}
	in := make(chan pending, 64)
	sizes := []int{resultBatchBytes / 3, resultBatchBytes / 3, resultBatchBytes / 3, resultBatchBytes + 1, 10, 10}
	for i, n := range sizes {
		in <- pending{Result: wire.Result{Key: fmt.Appendf(nil, "k%d", i), Outcome: "ok", Body: make([]byte, n)}, claimedAt: time.Now()}
	}
	close(in)
	deliver(e, r, in, 1, context.Background())
	total := 0
	for _, b := range r.batches {
		size := 0
		for i := range b {
			size += resultSize(&b[i])
		}
		if size > resultBatchBytes && len(b) > 1 {
			t.Fatalf("a batch of %d results and %d bytes, over %d", len(b), size, resultBatchBytes)
		}
		total += len(b)
	}
	if total != len(sizes) || len(r.batches) < 3 {
		t.Fatalf("%d results in %d batches", total, len(r.batches))
	}
}

// A 4xx from worker 0 is final: the batch is dropped at once and counted, not retried for
// resultRetryLimit as a transient failure would be, and its leases are released at once, so
// that its rows do not wait out a lease TTL (a lease worker 0 already ended is left alone:
// the release is a CAS from the exact grant).
func TestRefusedBatchIsNotRetried(t *testing.T) {
	for _, code := range []int{400, 409, 413} {
		e := testEnv(t)
		r := &recordingSender{err: &wire.StatusError{Path: wire.PathResults, Code: code, Msg: "no"}}
		in := make(chan pending, 4)
		var hashes []uint64
		for i := range 3 {
			key := fmt.Appendf(nil, "k%d", i)
			l, st := e.Seg.Leases().Acquire(shm.KeyHash(key), nowMs(), 60_000, 7)
			if st != shm.Acquired {
				t.Fatalf("acquire: %v", st)
			}
			hashes = append(hashes, l.KeyHash)
			in <- pending{Result: wire.Result{Key: key, Outcome: "ok", Lease: wire.Lease{Slot: l.Slot, State: l.State, KeyHash: l.KeyHash}}, claimedAt: time.Now()}
		}
		close(in)
		done := make(chan struct{})
		go func() { deliver(e, r, in, 1, context.Background()); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d: the batch is still being retried", code)
		}
		if len(r.batches) != 1 || e.Worker.Load(shm.CounterResultsDropped) != 3 {
			t.Fatalf("%d: %d attempts, %d dropped; want 1 attempt, 3 dropped", code, len(r.batches), e.Worker.Load(shm.CounterResultsDropped))
		}
		for _, h := range hashes {
			if _, st := e.Seg.Leases().Acquire(h, nowMs(), 60_000, 8); st != shm.Acquired {
				t.Fatalf("%d: a dropped result's row is not claimable at once: %v", code, st)
			}
		}
	}
}

// At a stop a batch worker 0 cannot take is given up when the flush bound ends, not after
// resultRetryLimit, and its leases are released at once.
func TestFlushBoundGivesUpAndReleases(t *testing.T) {
	e := testEnv(t)
	r := &recordingSender{err: fmt.Errorf("%w: gone", wire.ErrUnavailable)}
	lease, st := e.Seg.Leases().Acquire(42, nowMs(), 60_000, 7)
	if st != shm.Acquired {
		t.Fatalf("acquire: %v", st)
	}
	in := make(chan pending, 1)
	in <- pending{Result: wire.Result{Key: []byte("k"), Outcome: "ok", Lease: wire.Lease{Slot: lease.Slot, State: lease.State, KeyHash: lease.KeyHash}}, claimedAt: time.Now()}
	close(in)
	flush, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() { deliver(e, r, in, 1, flush); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("still retrying after the flush bound")
	}
	if e.Worker.Load(shm.CounterResultsDropped) != 1 {
		t.Fatal("the undeliverable result was not counted")
	}
	if info, ok := e.Seg.Leases().Lookup(42, nowMs()); ok && !info.Released {
		t.Fatalf("the lease is still held: %+v", info)
	}
	if _, st := e.Seg.Leases().Acquire(42, nowMs(), 60_000, 8); st != shm.Acquired {
		t.Fatalf("the row is not claimable at once: %v", st)
	}
}

// A render worker waits for worker 0 to serve before it claims, looking again with a growing
// pause, instead of failing a claim per attempt while worker 0 opens the store.
func TestWaitForWorker0(t *testing.T) {
	e := testEnv(t)
	e.Socket = filepath.Join(t.TempDir(), "w0.sock")
	ln, err := net.Listen("unix", e.Socket)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Worker 0 answers but does not serve yet for its first two looks.
		json.NewEncoder(w).Encode(wire.Status{Serving: calls.Add(1) > 2})
	})}
	go srv.Serve(ln)
	defer srv.Close()
	ready := make(chan bool, 1)
	go func() { ready <- waitForWorker0(context.Background(), e, wire.NewClient(e.Socket)) }()
	select {
	case ok := <-ready:
		if !ok || calls.Load() != 3 {
			t.Fatalf("waitForWorker0 returned %v after %d looks, want true after 3", ok, calls.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting after worker 0 served")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if waitForWorker0(ctx, e, wire.NewClient(filepath.Join(t.TempDir(), "none.sock"))) {
		t.Fatal("a stopped worker reported worker 0 ready")
	}
}
