package claim

import (
	"context"
	"fmt"
	"github.com/freshq/freshq/testkit/qtest"
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// The node's fence (shm.Fence) stops grants of a published set: an entry published before the
// node gave a shard up (the version moved) and any take at or past grantUntil (the leases were
// not renewed in time) are refused, their leases given back at once, and counted; neither the
// index fallback grants either. With the version back and grantUntil ahead, grants resume.
func TestFenceStopsGrantsOfAPublishedSet(t *testing.T) {
	n := newNode(t, routes)
	for i := range 8 {
		n.Put(fmt.Sprintf("desktop|https://shop.test/c/%d", i), start-hour-int64(i), true, 0, store.Lanes{})
	}
	fence := n.Seg.Fence()
	fence.SetGrantUntil(start + 60_000)
	n.sweep()
	fence.Bump() // a shard given up after the set was published
	w1, _ := n.Seg.Worker(1)
	c := qtest.Must(New(Options{Segment: n.Seg, Worker: w1, Fallback: NoFallback, Settings: qtest.Settings(n, ClaimSettingsOf), Now: n.Now, Holder: 1}))(t)
	jobs, err := c.Claim(context.Background(), 3)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("granted %d jobs (%v) from a set published before the fence moved", len(jobs), err)
	}
	if got := w1.Load(shm.CounterGrantsFenced); got != 1 {
		t.Fatalf("grants fenced: %d, want 1 (the first take shows the whole set is fenced)", got)
	}
	if st := n.Seg.Leases().Stats(n.Now()); st.Live != 0 {
		t.Fatalf("%d leases left live by fenced takes", st.Live)
	}
	if idx, _ := n.index.ClaimIndex(context.Background(), IndexClaim{N: 2, Holder: 9}); len(idx) != 2 {
		t.Fatalf("the index granted %d under the current version, want 2", len(idx))
	}

	// A set published under the current version is granted until grantUntil, then not.
	n.sweep()
	if jobs, _ := c.Claim(context.Background(), 1); len(jobs) != 1 {
		t.Fatalf("granted %d from a set of the current version, want 1", len(jobs))
	}
	fence.SetGrantUntil(n.Now())
	if jobs, _ := c.Claim(context.Background(), 1); len(jobs) != 0 {
		t.Fatalf("granted %d at grantUntil", len(jobs))
	}
	if idx, _ := n.index.ClaimIndex(context.Background(), IndexClaim{N: 1, Holder: 9}); len(idx) != 0 {
		t.Fatalf("the index granted %d at grantUntil", len(idx))
	}
	fence.SetGrantUntil(0) // no limit: a node alone on its store
	if jobs, _ := c.Claim(context.Background(), 1); len(jobs) != 1 {
		t.Fatalf("granted %d with no limit, want 1", len(jobs))
	}
}
