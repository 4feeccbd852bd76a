package pgschema

import "testing"

// A vacuum waits for 10,000 dead tuples and for 1 % of the live ones, whichever is more.
func TestVacuumDue(t *testing.T) {
	for _, c := range []struct {
		live, dead int64
		want       bool
	}{
		{0, 0, false},
		{0, 9_999, false},
		{0, 10_000, true},
		{500_000, 10_000, true},
		{2_000_000, 19_999, false},
		{2_000_000, 20_000, true},
		{10_000_000, 99_999, false},
		{10_000_000, 100_000, true},
	} {
		if got := vacuumDue(c.live, c.dead); got != c.want {
			t.Errorf("vacuumDue(live %d, dead %d) = %v, want %v", c.live, c.dead, got, c.want)
		}
	}
}
