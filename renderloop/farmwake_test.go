package renderloop

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/shm"
)

// emptyClaimer finds nothing to claim, and counts the claims.
type emptyClaimer struct{ claims atomic.Int64 }

func (c *emptyClaimer) Claim(context.Context, int) ([]claim.Job, error) {
	c.claims.Add(1)
	return nil, nil
}

// TestIdleLoopClaimsWhenTheFarmDivisionChanges: a render loop that found nothing to claim backs
// off (here for ever: the test holds its timer). When worker 0 writes a new division of the
// hosts' limits to the farm words (a host's share on this node may have grown: a slot handed
// over to it), the loop claims again at once rather than at the end of its backoff, up to a
// second; and when that claim finds nothing yet (another loop took the one index claim), it
// looks again after the shortest backoff, not twice its last.
func TestIdleLoopClaimsWhenTheFarmDivisionChanges(t *testing.T) {
	e := poolEnv(t, 1)
	claimer := &emptyClaimer{}
	never := make(chan time.Time)
	var mu sync.Mutex
	var waits []time.Duration // the backoffs the loop asked for
	p := &renderPool{e: e, claimer: claimer, after: time.After, farm: newFarmWake(e.Seg),
		idle: func(d time.Duration) <-chan time.Time {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
			if len(waits) == 1 {
				c := make(chan time.Time, 1) // the first backoff ends: the next is twice as long
				c <- time.Now()
				return c
			}
			return never
		}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go p.farm.run(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.renderLoop(ctx, ctx, make(chan pending)) }()
	defer func() { stop(); <-done }()
	waitClaims := func(n int64, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for claimer.claims.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d claims, want %d", what, claimer.claims.Load(), n)
			}
			time.Sleep(time.Millisecond) // waiting for a condition, not for time to pass
		}
	}
	waitClaims(2, "the loop's claims before and after its first backoff")
	words := [shm.FarmWords]uint64{0 | 3<<16 | 0xffff<<48, 1_800_000_000_000, 63_500 | 5_000<<32, 42 | 42<<32, 0}
	e.Seg.Hosts().StoreFarmShares(words, nil, nil)
	waitClaims(3, "the farm words named a new division while the loop backed off")
	// It found nothing again: it looks again after the shortest backoff, not twice the last.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n, last := len(waits), waits[len(waits)-1]
		mu.Unlock()
		if n >= 3 {
			if last != idleMin {
				t.Fatalf("after the wake the loop backs off %v, want %v: backoffs %v", last, idleMin, waits)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loop asked for %d backoffs", n)
		}
		time.Sleep(time.Millisecond) // waiting for a condition, not for time to pass
	}
}
