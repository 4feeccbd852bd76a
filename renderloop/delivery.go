package renderloop

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// delivery is a render worker's result sender (deliver) as a service. The render loops queue
// results on in; Stop takes no more and returns once every result queued has been delivered
// or dropped. It must therefore be called once no render loop can queue any more.
//
// Start's ctx is the flush bound: when it ends, the send attempt in progress is cut and what is
// left is dropped, its leases released (see deliver), so that Stop returns soon after.
type delivery struct {
	startstop.BaseStartStop
	e        *Deps
	sender   resultSender
	in       chan pending
	inFlight int
}

func newDelivery(e *Deps, sender resultSender, queue, inFlight int) *delivery {
	return &delivery{e: e, sender: sender, in: make(chan pending, queue), inFlight: inFlight}
}

func (d *delivery) Start(flush context.Context) error {
	flush, start, done := d.StartInit(flush)
	if !start {
		return nil
	}
	go func() {
		defer done()
		deliver(d.e, d.sender, d.in, d.inFlight, flush)
	}()
	return nil
}

// Stop ends the queue and waits until what it held is delivered or dropped. A delivery is
// started once: its queue, once ended, is not reopened.
func (d *delivery) Stop() { d.StopWith(func() { close(d.in) }) }

var _ startstop.Service = (*delivery)(nil)

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
func deliver(e *Deps, client resultSender, in <-chan pending, inFlight int, flush context.Context) {
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
func send(e *Deps, client resultSender, batch []pending, out []wire.Result, flush context.Context) {
	deadline := time.Now().Add(resultRetryLimit)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		ctx, cancel := context.WithTimeout(flush, 10*time.Second)
		_, err := client.SendResults(ctx, out)
		cancel()
		if err == nil {
			acked := time.Now()
			for _, p := range batch {
				e.Worker.Observe(shm.CounterResultLatency, shm.ResultLatencyBuckets[:], acked.Sub(p.claimedAt).Seconds(), 1e6)
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
func dropBatch(e *Deps, batch []pending, err error, msg string) {
	e.Worker.Add(shm.CounterResultsDropped, uint64(len(batch)))
	released := 0
	for _, p := range batch {
		if e.Seg.Leases().Release(shm.Lease{Slot: p.Lease.Slot, State: p.Lease.State, KeyHash: p.Lease.KeyHash}, e.Now(), 0) {
			released++
		}
	}
	ev := e.Log.Error().Err(err).Int("results", len(batch)).Int("released", released)
	var refused *wire.StatusError
	if errors.As(err, &refused) {
		ev = ev.Int("status", refused.Code)
	}
	ev.Msg(msg)
}
