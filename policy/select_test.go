package policy

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

type cand struct {
	lane  Lane
	score float64
	due   int64
	id    int
}

func randomCands(rng *rand.Rand, n int) []cand {
	cs := make([]cand, n)
	for i := range cs {
		cs[i] = cand{lane: Lane(rng.IntN(int(NumLanes))), score: float64(rng.IntN(50)) / 7, due: int64(rng.IntN(1000)), id: i}
	}
	return cs
}

// For the single-ranking modes the selector must return exactly the first k of a full sort.
func TestSelectorMatchesFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, mode := range []Mode{ModeScore, ModeEDF} {
		for trial := range 200 {
			n, k := rng.IntN(400), rng.IntN(60)
			cs := randomCands(rng, n)
			sel := NewSelector[int](k, mode, Shares{})
			for _, c := range cs {
				if sel.Admits(c.lane, c.score, c.due) != wouldAdmit(sel, c) {
					t.Fatal("Admits disagrees with the heap")
				}
				sel.Offer(c.lane, c.score, c.due, c.id)
				if l := len(sel.heaps[0].items); l > k {
					t.Fatalf("heap holds %d > k=%d", l, k)
				}
			}
			got := sel.Result()
			want := slices.Clone(cs)
			slices.SortStableFunc(want, func(a, b cand) int {
				if mode == ModeScore && a.score != b.score {
					if a.score > b.score {
						return -1
					}
					return 1
				}
				return int(a.due - b.due)
			})
			want = want[:min(k, n)]
			if len(got) != len(want) {
				t.Fatalf("%v trial %d: %d items, want %d", mode, trial, len(got), len(want))
			}
			for i := range got {
				if got[i].Value != want[i].id {
					t.Fatalf("%v trial %d position %d: id %d, want %d", mode, trial, i, got[i].Value, want[i].id)
				}
			}
		}
	}
}

func wouldAdmit(s *Selector[int], c cand) bool {
	h := s.heapFor(c.lane)
	if len(h.items) < s.k {
		return true
	}
	if s.k == 0 {
		return false
	}
	it := Item[int]{Score: c.score, DueAtMs: c.due, seq: s.seq}
	return s.better(&it, &h.items[0])
}

func TestSelectorBrokenScoresNeverLead(t *testing.T) {
	sel := NewSelector[string](3, ModeScore, Shares{})
	sel.Offer(LaneSubmitted, math.NaN(), 1, "nan")
	sel.Offer(LaneSubmitted, -5, 1, "negative")
	sel.Offer(LaneSubmitted, 0.5, 2, "real")
	if got := sel.Result(); got[0].Value != "real" {
		t.Fatalf("a broken score led the set: %v", got)
	}
}

var shares = Shares{UrgentMax: 0.2, DiscoveredMin: 0.10, ColdMin: 0.02}

// In lanes mode every prefix of the result honours the shares, as far as each lane has rows.
func TestLanesPrefixShares(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 300 {
		k := 1 + rng.IntN(200)
		var cs []cand
		// Skewed mixes: lanes with few rows, lanes with many, and lanes that outscore others.
		perLane := [NumLanes]int{rng.IntN(3 * k), rng.IntN(3 * k), rng.IntN(k/2 + 1), rng.IntN(k/4 + 1)}
		boost := [NumLanes]float64{1, 10, 0.1, 0.01} // discovered and cold score far below submitted
		id := 0
		for l := range NumLanes {
			for range perLane[l] {
				cs = append(cs, cand{lane: l, score: rng.Float64() * boost[l], due: int64(rng.IntN(1000)), id: id})
				id++
			}
		}
		rng.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
		sel := NewSelector[int](k, ModeLanes, shares)
		for _, c := range cs {
			sel.Offer(c.lane, c.score, c.due, c.id)
		}
		for l := range NumLanes {
			if len(sel.heaps[l].items) > k {
				t.Fatalf("lane %v holds %d > k", l, len(sel.heaps[l].items))
			}
		}
		got := sel.Result()
		if want := min(k, len(cs)); len(got) != want {
			t.Fatalf("trial %d: %d items, want %d", trial, len(got), want)
		}
		var count [NumLanes]int
		for m, it := range got {
			count[it.Lane]++
			pos := float64(m + 1)
			othersLeft := perLane[LaneSubmitted]+perLane[LaneDiscovered]+perLane[LaneCold] >
				count[LaneSubmitted]+count[LaneDiscovered]+count[LaneCold]
			if float64(count[LaneUrgent]) > math.Ceil(shares.UrgentMax*pos) && othersLeft {
				t.Fatalf("trial %d prefix %d: %d urgent over the cap while other lanes had rows", trial, m+1, count[LaneUrgent])
			}
			for _, f := range []struct {
				lane  Lane
				share float64
			}{{LaneDiscovered, shares.DiscoveredMin}, {LaneCold, shares.ColdMin}} {
				if count[f.lane] < perLane[f.lane] && float64(count[f.lane]) < math.Floor(f.share*pos) {
					t.Fatalf("trial %d prefix %d: %v has %d, floor %v, and rows left", trial, m+1, f.lane, count[f.lane], math.Floor(f.share*pos))
				}
			}
		}
		// Within a lane, the order is by score.
		last := [NumLanes]float64{math.Inf(1), math.Inf(1), math.Inf(1), math.Inf(1)}
		for _, it := range got {
			if it.Score > last[it.Lane] {
				t.Fatalf("trial %d: lane %v out of score order", trial, it.Lane)
			}
			last[it.Lane] = it.Score
		}
	}
}

func TestLanesUrgentComesFirst(t *testing.T) {
	sel := NewSelector[string](10, ModeLanes, shares)
	for i := range 5 {
		sel.Offer(LaneSubmitted, 9, int64(i), "submitted")
	}
	sel.Offer(LaneUrgent, 0, 0, "urgent")
	if got := sel.Result(); got[0].Value != "urgent" {
		t.Fatalf("urgent not first: %v", got[0])
	}
	// Only urgent rows: the cap takes nothing from anyone, so the whole set fills.
	sel = NewSelector[string](10, ModeLanes, shares)
	for i := range 20 {
		sel.Offer(LaneUrgent, float64(i), 0, "u")
	}
	if got := sel.Result(); len(got) != 10 {
		t.Fatalf("urgent-only set has %d items, want 10", len(got))
	}
}

func TestStrictServesLanesInPriority(t *testing.T) {
	sel := NewSelector[Lane](6, ModeStrict, shares)
	for _, l := range []Lane{LaneDiscovered, LaneCold, LaneSubmitted, LaneUrgent, LaneDiscovered, LaneSubmitted} {
		sel.Offer(l, 100-float64(l), 0, l)
	}
	var order []Lane
	for _, it := range sel.Result() {
		order = append(order, it.Value)
	}
	want := []Lane{LaneUrgent, LaneSubmitted, LaneSubmitted, LaneCold, LaneDiscovered, LaneDiscovered}
	if !slices.Equal(order, want) {
		t.Fatalf("strict order %v, want %v", order, want)
	}
}

func TestSelectorReset(t *testing.T) {
	sel := NewSelector[int](2, ModeScore, Shares{})
	sel.Offer(LaneSubmitted, 1, 0, 1)
	sel.Reset()
	sel.Offer(LaneSubmitted, 0.5, 0, 2)
	if got := sel.Result(); len(got) != 1 || got[0].Value != 2 {
		t.Fatalf("after reset: %v", got)
	}
	if got := NewSelector[int](0, ModeLanes, shares); len(got.Result()) != 0 {
		t.Fatal("k=0 selector returned items")
	}
}

// The lane bars turn candidates away that keeping K per lane would keep, and Result is the
// same: each turned-away row is one the interleave could never publish nor be swayed by.
// Candidates come in random order and best first (as the sweep's class merge offers them,
// where the bars turn most away), under shares that include the edges (none, all, thirds).
func TestLaneBarsKeepTheResult(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	shareSets := []Shares{
		shares,
		{},
		{UrgentMax: 1, DiscoveredMin: 1, ColdMin: 1},
		{UrgentMax: 1.0 / 3, DiscoveredMin: 1.0 / 3, ColdMin: 1.0 / 3},
		{UrgentMax: 0.07, DiscoveredMin: 0.29, ColdMin: 0.13},
	}
	turnedAway := 0
	for trial := range 3000 {
		sh := shareSets[trial%len(shareSets)]
		k := rng.IntN(40)
		perLane := [NumLanes]int{rng.IntN(3*k + 2), rng.IntN(3*k + 2), rng.IntN(2*k + 2), rng.IntN(k + 2)}
		boost := [NumLanes]float64{rng.Float64() * 4, rng.Float64() * 4, rng.Float64() * 4, rng.Float64() * 4}
		var cs []cand
		for l := range NumLanes {
			for range perLane[l] {
				// Few distinct scores and due times, so ties are common.
				cs = append(cs, cand{lane: l, score: float64(rng.IntN(12)) * boost[l], due: int64(rng.IntN(20)), id: len(cs)})
			}
		}
		rng.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
		if trial%2 == 1 {
			slices.SortStableFunc(cs, func(a, b cand) int {
				if a.score != b.score {
					if a.score > b.score {
						return -1
					}
					return 1
				}
				return int(a.due - b.due)
			})
		}
		barred := NewSelector[int](k, ModeLanes, sh)
		perLaneOnly := NewSelector[int](k, ModeLanes, sh)
		perLaneOnly.perLaneOnly = true
		for _, c := range cs {
			if perLaneOnly.Admits(c.lane, c.score, c.due) {
				perLaneOnly.Offer(c.lane, c.score, c.due, c.id)
			}
			if barred.Admits(c.lane, c.score, c.due) {
				barred.Offer(c.lane, c.score, c.due, c.id)
			}
		}
		held := func(s *Selector[int]) (n int) {
			for l := range s.heaps {
				n += len(s.heaps[l].items)
			}
			return n
		}
		turnedAway += held(perLaneOnly) - held(barred)
		want, got := perLaneOnly.Result(), barred.Result()
		if len(got) != len(want) {
			t.Fatalf("trial %d (k=%d, %+v, lanes %v): %d items, want %d", trial, k, sh, perLane, len(got), len(want))
		}
		for i := range want {
			if got[i].Value != want[i].Value {
				t.Fatalf("trial %d (k=%d, %+v, lanes %v) position %d: candidate %d, want %d", trial, k, sh, perLane, i, got[i].Value, want[i].Value)
			}
		}
	}
	if turnedAway == 0 {
		t.Fatal("the bars turned nothing away: the test exercises nothing")
	}
	t.Logf("the bars turned away %d candidates in all", turnedAway)
}

// Best first, the bars hold a sweep to about K rows, not K per lane.
func TestLaneBarsHoldAboutK(t *testing.T) {
	const k = 100
	admitted := func(sel *Selector[int]) (n int) {
		for i := range 10 * k { // every lane with 10k rows, scores falling together
			for _, l := range []Lane{LaneSubmitted, LaneDiscovered, LaneCold, LaneUrgent} {
				score := float64(10*k - i)
				if sel.Admits(l, score, 0) {
					sel.Offer(l, score, 0, i)
					n++
				}
			}
		}
		return n
	}
	perLaneOnly := NewSelector[int](k, ModeLanes, shares)
	perLaneOnly.perLaneOnly = true
	if n := admitted(perLaneOnly); n != 4*k {
		t.Fatalf("per lane only: %d admitted, want %d", n, 4*k)
	}
	// Non-urgent: the best K of the three lanes (each floor's best rows are among them).
	// Urgent: every row until the other lanes hold K − ⌈UrgentMax·K⌉ = 80, 3 a round: 26.
	if n := admitted(NewSelector[int](k, ModeLanes, shares)); n != k+26 {
		t.Fatalf("with the lane bars: %d admitted, want %d", n, k+26)
	}
}

// A selector is used again after Result, sweep after sweep: every Result of a reused selector
// equals that of a fresh one given the same candidates, in every mode, however many items
// the earlier rounds left behind.
func TestSelectorReusedAfterResult(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, mode := range []Mode{ModeScore, ModeEDF, ModeLanes, ModeStrict} {
		k := 25
		reused := NewSelector[int](k, mode, shares)
		for trial := range 300 {
			cs := randomCands(rng, rng.IntN(120))
			fresh := NewSelector[int](k, mode, shares)
			for _, c := range cs {
				if fresh.Admits(c.lane, c.score, c.due) != reused.Admits(c.lane, c.score, c.due) {
					t.Fatalf("%v trial %d: Admits differs for candidate %d", mode, trial, c.id)
				}
				fresh.Offer(c.lane, c.score, c.due, c.id)
				reused.Offer(c.lane, c.score, c.due, c.id)
			}
			want, got := fresh.Result(), reused.Result()
			if !slices.Equal(got, want) {
				t.Fatalf("%v trial %d: reused selector gave %v, a fresh one %v", mode, trial, got, want)
			}
			if trial%7 == 0 { // a later round must not change a Result already handed out
				before := slices.Clone(got)
				for _, c := range randomCands(rng, 60) {
					reused.Offer(c.lane, c.score, c.due, c.id)
				}
				if !slices.Equal(got, before) {
					t.Fatalf("%v trial %d: offers after Result changed it", mode, trial)
				}
				reused.Reset()
			}
		}
	}
}

// The sweep asks Admits of every row it reads and offers most of them: once a selector has
// held a full set, neither allocates, and Result allocates only the slice it returns.
func TestSelectorWarmAllocatesNothing(t *testing.T) {
	const k = 64
	rng := rand.New(rand.NewPCG(13, 14))
	cs := randomCands(rng, 4*k)
	for _, mode := range []Mode{ModeScore, ModeEDF, ModeLanes, ModeStrict} {
		sel := NewSelector[int](k, mode, shares)
		round := func() {
			for _, c := range cs {
				if sel.Admits(c.lane, c.score, c.due) {
					sel.Offer(c.lane, c.score, c.due, c.id)
				}
			}
		}
		round()
		sel.Result()
		if n := testing.AllocsPerRun(20, func() { round(); sel.Reset() }); n != 0 {
			t.Errorf("%v: Admits and Offer on a warm selector allocate %.1f times a round, want 0", mode, n)
		}
		if n := testing.AllocsPerRun(20, func() { round(); sel.Result() }); n > 1 {
			t.Errorf("%v: a round and its Result allocate %.1f times, want at most 1 (the result)", mode, n)
		}
	}
}
