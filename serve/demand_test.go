package serve

import (
	"maps"
	"testing"
)

// The requests counted since the last Take are handed over once, within MaxKeys; what a flush
// gives back is counted again with the next.
func TestDemandTake(t *testing.T) {
	d := &Demand{HalfLifeMs: 1000, MaxKeys: 2}
	for _, k := range []string{"a", "b", "a", "c"} {
		d.Note([]byte(k), 0)
	}
	if got := d.Take(); !maps.Equal(got, map[string]uint32{"a": 2, "b": 1}) {
		t.Fatalf("first take %v", got)
	}
	if got := d.Take(); len(got) != 0 {
		t.Fatalf("second take %v, want nothing", got)
	}
	d.Note([]byte("a"), 1)
	// One slot left beside a: the key asked for most takes it, whatever the map's order.
	for range 20 {
		d.Return(map[string]uint32{"b": 1, "c": 9, "d": 1})
		if got := d.Take(); !maps.Equal(got, map[string]uint32{"a": 1, "c": 9}) {
			t.Fatalf("take after a return %v, want a and the most asked for, c", got)
		}
		d.Note([]byte("a"), 1)
	}
	d.Return(map[string]uint32{"a": 3})
	if got := d.Take(); !maps.Equal(got, map[string]uint32{"a": 4}) {
		t.Fatalf("a returned count adds to the pending one: %v", got)
	}
	if d.Untracked() != 1 { // c's first request, beyond the generation's MaxKeys
		t.Fatalf("untracked %d", d.Untracked())
	}
}
