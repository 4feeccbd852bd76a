package store

import "testing"

func TestMemFloor(t *testing.T) {
	var zero MemFloor
	if zero.Load() != 0 {
		t.Fatal("zero MemFloor is not at 0")
	}
	f := NewMemFloor(100)
	if f.Lower(100) || f.Lower(150) || f.Load() != 100 {
		t.Fatal("Lower to a value not below the floor changed it")
	}
	if !f.Lower(40) || f.Load() != 40 {
		t.Fatal("Lower below the floor did not lower it")
	}
	if f.Advance(39, 50) || f.Load() != 40 {
		t.Fatal("Advance from a stale observation succeeded")
	}
	if f.Advance(40, 40) || f.Advance(40, 30) {
		t.Fatal("Advance to a value not above the observed one succeeded")
	}
	if !f.Advance(40, 60) || f.Load() != 60 {
		t.Fatal("Advance from the current value failed")
	}
}
