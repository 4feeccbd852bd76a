package hosts

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDemandSharesFollowDemand: a host's limit divided by demand adds up to the limit exactly,
// gives no slot to a node with no demand while another has some, gives each node its quota
// rounded down or up (largest remainder), is the same for the same inputs, and is the equal
// division when no node has demand.
func TestDemandSharesFollowDemand(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := 1 + rng.IntN(6)
		limit := 1 + rng.IntN(9)
		hash := rng.Uint64()
		round := rng.Int64N(1000)
		demand := make([]int, n)
		total := 0
		for i := range demand {
			if rng.IntN(3) > 0 {
				demand[i] = rng.IntN(60)
			}
			total += demand[i]
		}
		got := demandShares(limit, hash, demand, nil, round)
		if again := demandShares(limit, hash, slices.Clone(demand), nil, round); !slices.Equal(got, again) {
			t.Fatalf("same inputs, two divisions: %v and %v", got, again)
		}
		sum := 0
		for i, s := range got {
			sum += s
			if total == 0 {
				if want := share(limit, hash, uint16(i), uint16(n), round); s != want {
					t.Fatalf("limit %d, no demand: node %d holds %d, the equal division %d", limit, i, s, want)
				}
				continue
			}
			if demand[i] == 0 && s != 0 {
				t.Fatalf("limit %d, demand %v: node %d has none and holds %d (%v)", limit, demand, i, s, got)
			}
			lo := limit * demand[i] / total
			if s < lo || s > lo+1 {
				t.Fatalf("limit %d, demand %v: node %d holds %d, its quota rounds to %d or %d", limit, demand, i, s, lo, lo+1)
			}
		}
		if sum != limit {
			t.Fatalf("limit %d, demand %v: shares %v add up to %d", limit, demand, got, sum)
		}
	}
	// The spread the cluster test met at its first tick (6, 12 and 14 of 32 shards): the two
	// slots go to the two nodes with the most rows, not to the one with the fewest.
	if got := demandShares(2, 7, []int{6, 12, 14}, nil, 3); !slices.Equal(got, []int{0, 1, 1}) {
		t.Fatalf("limit 2, demand 6/12/14: %v, want [0 1 1]", got)
	}
}
