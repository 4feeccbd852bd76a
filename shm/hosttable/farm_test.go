package hosttable

import (
	"sync"
	"testing"
)

// TestFarmWordsNeverTear: a reader racing worker 0's rewrites of the farm words gets one of the
// sets of words written, whole, never a mix of two (the words hold one membership only
// together), and a segment never written reads all zero ("no farm").
func TestFarmWordsNeverTear(t *testing.T) {
	table := newTable(t, 4)
	if w := table.LoadFarm(); w != ([FarmWords]uint64{}) {
		t.Fatalf("a new segment's farm words: %v, want zero", w)
	}
	a := [FarmWords]uint64{3<<16 | 1<<32 | 2<<48, 1, 2, 3, 4}
	b := [FarmWords]uint64{2 | 4<<16 | 0xffff<<48, 10, 20, 30, ^uint64(39)}
	table.StoreFarm(a)
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
				table.StoreFarm(b)
			} else {
				table.StoreFarm(a)
			}
		}
	}()
	for range 20_000 {
		if w := table.LoadFarm(); w != a && w != b && w != ([FarmWords]uint64{}) {
			close(stop)
			wg.Wait()
			t.Fatalf("a torn read: %v", w)
		}
	}
	close(stop)
	wg.Wait()
	if w := table.LoadFarm(); w != a && w != b {
		t.Fatalf("after the writes: %v", w)
	}
}
