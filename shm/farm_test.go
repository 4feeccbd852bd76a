package shm

import (
	"sync"
	"testing"
)

// TestFarmWordsNeverTear: a reader racing worker 0's rewrites of the farm words gets one of the
// memberships written, whole, never a mix of two (the words hold one membership only together),
// and a segment never written says "no farm".
func TestFarmWordsNeverTear(t *testing.T) {
	seg := newTestSegment(t, Options{Workers: 2})
	if f := seg.Hosts().Farm(); f != (HostFarm{}) {
		t.Fatalf("a new segment's farm: %+v, want none", f)
	}
	a := HostFarm{Index: 0, Nodes: 3, PrevIndex: 1, PrevNodes: 2, SinceMs: 1, GraceMs: 2, RoundMs: 3, ClockOffsetMs: 4}
	b := HostFarm{Index: 2, Nodes: 4, PrevIndex: 0, PrevNodes: FarmNone, SinceMs: 10, GraceMs: 20, RoundMs: 30, ClockOffsetMs: -40}
	seg.Hosts().SetFarm(a)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				seg.Hosts().SetFarm(b)
			} else {
				seg.Hosts().SetFarm(a)
			}
		}
	}()
	for range 20_000 {
		if f := seg.Hosts().Farm(); f != a && f != b && f != (HostFarm{}) {
			close(stop)
			wg.Wait()
			t.Fatalf("a torn read: %+v", f)
		}
	}
	close(stop)
	wg.Wait()
	if f := seg.Hosts().Farm(); f != a && f != b {
		t.Fatalf("after the writes: %+v", f)
	}
}
