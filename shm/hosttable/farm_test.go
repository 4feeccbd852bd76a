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

// TestFarmSharesWithTheWords: a host's share word is read with the farm words it was written
// with; a host with no entry is not found; a writing with fewer entries frees the rest.
func TestFarmSharesWithTheWords(t *testing.T) {
	tb := newTable(t, 4)
	w := [FarmWords]uint64{1, 2, 3, 4, 5}
	tb.StoreFarmShares(w, []uint64{11, 22}, []uint64{7, 8})
	if got, share, ok := tb.LoadFarmShare(22); got != w || !ok || share != 8 {
		t.Fatalf("host 22: words %v share %d found %v; want %v 8 true", got, share, ok, w)
	}
	if _, _, ok := tb.LoadFarmShare(33); ok {
		t.Fatal("a host with no entry was found")
	}
	w2 := [FarmWords]uint64{9, 9, 9, 9, 9}
	tb.StoreFarmShares(w2, []uint64{11}, []uint64{1})
	if got, _, ok := tb.LoadFarmShare(22); got != w2 || ok {
		t.Fatalf("after a writing without it, host 22: words %v found %v", got, ok)
	}
	if got := tb.LoadFarm(); got != w2 {
		t.Fatalf("LoadFarm %v, want %v", got, w2)
	}
}
