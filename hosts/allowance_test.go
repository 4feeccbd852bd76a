package hosts

import (
	"testing"

	"github.com/freshq/freshq/shm"
)

// TestAllow: a host not in the table is at its configured maximum; a lowered limit binds below
// it and never above (a maximum lowered by a reload wins); a pause holds until its end, not at
// it; the maximum is bounded to what the lease table admits.
func TestAllow(t *testing.T) {
	const now = 10_000
	for _, c := range []struct {
		name  string
		st    shm.HostState
		found bool
		max   int
		want  Allowance
	}{
		{"absent", shm.HostState{Limit: 1, PausedUntilMs: now + 5}, false, 4, Allowance{Max: 4, Share: 4, Limit: 4}},
		{"at defaults", shm.HostState{}, true, 4, Allowance{Max: 4, Share: 4, Limit: 4}},
		{"lowered", shm.HostState{Limit: 2}, true, 4, Allowance{Max: 4, Share: 4, Limit: 2}},
		{"max lowered below the limit", shm.HostState{Limit: 3}, true, 2, Allowance{Max: 2, Share: 2, Limit: 2}},
		{"paused", shm.HostState{Limit: 1, PausedUntilMs: now + 1}, true, 4, Allowance{Max: 4, Share: 4, Limit: 1, Paused: true, PausedUntilMs: now + 1}},
		{"pause ends at its time", shm.HostState{PausedUntilMs: now}, true, 4, Allowance{Max: 4, Share: 4, Limit: 4}},
		{"max above the lease table's", shm.HostState{}, true, MaxTokens + 5, Allowance{Max: MaxTokens, Share: MaxTokens, Limit: MaxTokens}},
		{"max below one", shm.HostState{}, false, 0, Allowance{Max: 1, Share: 1, Limit: 1}},
	} {
		if got := Allow(1, c.st, c.found, c.max, Membership{}, now); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestEntryCap: ⌈2·K·limit / S⌉ entries of a set of K on S render slots, at least the limit,
// and no cap (0) once that reaches the set.
func TestEntryCap(t *testing.T) {
	for _, c := range []struct{ limit, k, slots, want int }{
		{4, 1000, 16, 500},
		{1, 1000, 16, 125},
		{1, 10, 64, 1},   // ⌈20/64⌉ = 1
		{3, 10, 64, 3},   // ⌈60/64⌉ = 1, but never fewer than the limit
		{8, 1000, 16, 0}, // its share is the whole set
		{4, 100, 0, 0},   // no render slots counted: one slot
	} {
		if got := (Allowance{Limit: c.limit, Max: c.limit, Share: c.limit}).EntryCap(c.k, c.slots); got != c.want {
			t.Errorf("limit %d, K %d, S %d: cap %d, want %d", c.limit, c.k, c.slots, got, c.want)
		}
	}
}
