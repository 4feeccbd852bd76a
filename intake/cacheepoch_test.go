package intake

import (
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// An operator's rush (POST /v1/prioritize mode rush, and POST /recache, which rushes) raises the
// cache epoch in worker 0's block, so that the renders of what it rushed fetch the site's
// scripts anew; a wait does not. (It is raised before the rows are made due, so that no render
// of them can begin under the old epoch: a rush naming nothing stored may raise it too, which
// costs each browser one cache clear.)
func TestRushRaisesTheCacheEpoch(t *testing.T) {
	e, svc := newTargets(t)
	if n := upsert(t, svc, wire.TargetItem{URL: "https://a.test/p"}); n != 1 {
		t.Fatalf("upsert: %d", n)
	}
	epoch := func() uint64 { return e.Worker0.Load(shm.CounterCacheEpoch) }
	if _, err := svc.Prioritize(wire.PrioritizeRequest{URL: "https://a.test/p", Mode: "wait"}); err != nil {
		t.Fatal(err)
	}
	if got := epoch(); got != 0 {
		t.Fatalf("a wait raised the cache epoch to %d", got)
	}
	if _, err := svc.Prioritize(wire.PrioritizeRequest{URL: "https://a.test/p", Mode: "rush"}); err != nil {
		t.Fatal(err)
	}
	if got, seen := epoch(), e.Seg.CacheEpoch(); got != 1 || seen != 1 {
		t.Fatalf("after a rush the cache epoch is %d (a render worker reads %d), want 1", got, seen)
	}
	if _, err := svc.Prioritize(wire.PrioritizeRequest{URL: "https://a.test/p", Mode: "rush"}); err != nil {
		t.Fatal(err)
	}
	if got := epoch(); got != 2 {
		t.Fatalf("after a second rush the cache epoch is %d, want 2", got)
	}
}
