package shm

import (
	"sync"
	"testing"
)

func TestFloorLowerIsCASMin(t *testing.T) {
	f := newTestSegment(t, Options{}).Floor()
	if f.Load() != 0 {
		t.Fatalf("new floor %d, want 0", f.Load())
	}
	if !f.Advance(0, 1000) {
		t.Fatal("advance from the observed value failed")
	}
	if f.Lower(2000) {
		t.Fatal("lowering to a higher value succeeded")
	}
	if !f.Lower(500) || f.Load() != 500 {
		t.Fatalf("lower to 500: floor %d", f.Load())
	}
	if f.Lower(500) {
		t.Fatal("lowering to the same value reported a change")
	}
}

func TestFloorAdvanceOnlyFromObserved(t *testing.T) {
	f := newTestSegment(t, Options{}).Floor()
	f.Advance(0, 1000)
	observed := f.Load()
	f.Lower(400) // a write lands below the floor while the pass runs
	if f.Advance(observed, 5000) {
		t.Fatal("advance succeeded although the floor was lowered since it was observed")
	}
	if f.Load() != 400 {
		t.Fatalf("floor %d, want 400", f.Load())
	}
	if f.Advance(400, 400) || f.Advance(400, 300) {
		t.Fatal("advance to a value not above the observed one succeeded")
	}
}

func TestFloorConcurrentLowersEndAtMinimum(t *testing.T) {
	f := newTestSegment(t, Options{}).Floor()
	f.Advance(0, 1_000_000)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				f.Lower(int64(500_000 + (i*8+g)*37%400_000))
			}
		}()
	}
	wg.Wait()
	want := int64(1_000_000)
	for g := range 8 {
		for i := range 1000 {
			want = min(want, int64(500_000+(i*8+g)*37%400_000))
		}
	}
	if f.Load() != want {
		t.Fatalf("floor %d after concurrent lowers, want the minimum %d", f.Load(), want)
	}
}

func TestFloorPinAndNextDue(t *testing.T) {
	f := newTestSegment(t, Options{}).Floor()
	f.SetPin(77, 1234)
	if h, since := f.Pin(); h != 77 || since != 1234 {
		t.Fatalf("pin (%d, %d)", h, since)
	}
	f.SetPin(0, 0)
	if h, _ := f.Pin(); h != 0 {
		t.Fatal("pin not cleared")
	}
	f.SetNextDue(99)
	f.SetAdvancedAt(100)
	if f.NextDue() != 99 || f.AdvancedAt() != 100 {
		t.Fatal("next due / advanced at not kept")
	}
}
