package serve

import (
	"maps"
	"strings"
	"testing"
)

// budgetOf is a MaxBytes under which each of Demand's maps holds n keys of one byte.
func budgetOf(n int) int64 { return 3 * int64(n) * cost("a") }

// The requests counted since the last Take are handed over once, within the pending share of
// MaxBytes; what a flush gives back is counted again with the next.
func TestDemandTake(t *testing.T) {
	d := &Demand{HalfLifeMs: 1000, MaxBytes: budgetOf(2)}
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
	if d.Untracked() != 1 { // c's first request, beyond the generation's share
		t.Fatalf("untracked %d", d.Untracked())
	}
}

// Long keys are bounded by their bytes: a budget that holds a thousand short keys holds a few
// of the longest the store accepts, and what the maps hold never exceeds it, across rotations.
func TestDemandBoundedByBytes(t *testing.T) {
	const budget = 1 << 20
	d := &Demand{HalfLifeMs: 1000, MaxBytes: budget}
	long := strings.Repeat("x", 2000)
	for i := range 10_000 {
		d.Note([]byte(long+strings.Repeat("y", i%50)+string(rune('a'+i%26))), int64(i/10))
		if b := d.Bytes(); b > budget {
			t.Fatalf("after %d notes the counts hold %d bytes, budget %d", i+1, b, budget)
		}
	}
	if d.Untracked() == 0 {
		t.Fatal("ten thousand 2 KB keys fit a 1 MiB budget")
	}
	d.Take()
	if b := d.Bytes(); b > 2*budget/3 {
		t.Fatalf("after a take %d bytes held, want the generations' two thirds at most", b)
	}
}
