package ui

import (
	"testing"

	"github.com/freshq/freshq/shm"
)

// A minute's lateness figures are bucket upper bounds: the p90 the bound where 90 % of the
// grants are reached, the worst the highest bucket with a grant (-1 past the last bound), none
// for a minute without grants.
func TestLatenessFigures(t *testing.T) {
	n := len(shm.LatenessBuckets) + 1
	delta := make([]uint64, n)
	if p, w := latenessFigures(delta); p != nil || w != nil {
		t.Fatalf("no grants: %v %v, want none", p, w)
	}
	delta[0], delta[2], delta[4] = 80, 15, 5 // ≤0.1: 80, ≤1: 15, ≤2: 5
	p, w := latenessFigures(delta)
	if *p != 1 || *w != 2 {
		t.Errorf("p90 %v worst %v, want 1 and 2", *p, *w)
	}
	delta[n-1] = 1
	if _, w := latenessFigures(delta); *w != -1 {
		t.Errorf("a grant past the last bound: worst %v, want -1", *w)
	}
}
