package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/freshq/freshq/freshness"
)

// freshSchedule is the hidden truth: every page's change times, cost and validators.
type freshSchedule struct {
	meanChange []float64   // seconds between changes; 0 = never changes
	changes    [][]float64 // change times, seconds since the start
	cost       []time.Duration
	validators []bool
	popularity []float64 // share of the crawler's requests
}

func newFreshSchedule(seed uint64, pages int, horizon time.Duration) *freshSchedule {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	s := &freshSchedule{
		meanChange: make([]float64, pages), changes: make([][]float64, pages),
		cost: make([]time.Duration, pages), validators: make([]bool, pages), popularity: make([]float64, pages),
	}
	for i := range pages {
		s.cost[i] = time.Duration((0.5 + 0.3*rng.Float64()) * float64(time.Second))
		s.validators[i] = rng.Float64() < 0.5
		if rng.Float64() < 0.3 {
			continue
		}
		s.meanChange[i] = math.Exp(math.Log(20) + rng.Float64()*(math.Log(1200)-math.Log(20)))
		for t := rng.ExpFloat64() * s.meanChange[i]; t < horizon.Seconds(); t += rng.ExpFloat64() * s.meanChange[i] {
			s.changes[i] = append(s.changes[i], t)
		}
	}
	// Popularity: a random ranking, but a fifth of the pages take their ranks (the same set
	// of ranks) in order of change rate, the fastest changing the most popular.
	rank := rng.Perm(pages)
	chosen := rng.Perm(pages)[:pages/5]
	ranks := make([]int, len(chosen))
	for j, p := range chosen {
		ranks[j] = rank[p]
	}
	sort.Ints(ranks)
	sort.Slice(chosen, func(a, c int) bool { return changeRate(s.meanChange[chosen[a]]) > changeRate(s.meanChange[chosen[c]]) })
	for j, p := range chosen {
		rank[p] = ranks[j]
	}
	total := 0.0
	for i := range pages {
		s.popularity[i] = 1 / float64(rank[i]+1) // Zipf, exponent 1
		total += s.popularity[i]
	}
	for i := range pages {
		s.popularity[i] /= total
	}
	return s
}

func changeRate(mean float64) float64 {
	if mean == 0 {
		return 0
	}
	return 1 / mean
}

// version is page i's version at sec seconds after the start: the changes up to then.
func (s *freshSchedule) version(i int, sec float64) int {
	return sort.SearchFloat64s(s.changes[i], sec+1e-9)
}


func main() {
	s := newFreshSchedule(1, 960, 7*time.Minute)
	meanL := 0.0
	for i := range 960 { meanL += 3600 * changeRate(s.meanChange[i]) }
	meanL /= 960
	for _, longest := range []float64{0, 200, 240, 300, 400} {
		truth := make([]freshness.Page, 960)
		blind := make([]freshness.Page, 960)
		mu := 0.0
		for i := range truth {
			truth[i] = freshness.Page{Lambda: 3600 * changeRate(s.meanChange[i]), Mu: 3600 * 30 * s.popularity[i], MaxPerHour: 3600 / 3.75}
			if longest > 0 { truth[i].MinPerHour = 3600 / longest }
			blind[i] = truth[i]
			blind[i].Lambda = meanL
			mu += truth[i].Mu
		}
		cap := 5.2
		pt := freshness.Optimal(truth, cap*3600)
		pb := freshness.Optimal(blind, cap*3600)
		st, sb := 0.0, 0.0
		for i, p := range truth {
			st += p.Mu * freshness.StaleShare(p.Lambda, pt.PerHour[i])
			sb += p.Mu * freshness.StaleShare(p.Lambda, pb.PerHour[i])
		}
		fmt.Printf("longest %4.0f s: optimum %.1f %%, knowing only request rates %.1f %%\n", longest, 100*st/mu, 100*sb/mu)
	}
}
