package policy

import (
	"math"
	"slices"
)

// Shares are the lane shares of a published set (docs/ARCHITECTURE.md, "lane").
type Shares struct {
	UrgentMax     float64 // urgent is served first but holds at most this share
	DiscoveredMin float64 // discovered holds at least this share while it has rows
	ColdMin       float64 // cold holds at least this share while it has rows
}

// Mode is how a Selector ranks and orders. Production uses ModeLanes; the others exist so the
// simulator can compare policies through this same code.
type Mode uint8

const (
	// ModeLanes ranks by score within each lane and interleaves lanes by Shares.
	ModeLanes Mode = iota
	// ModeScore ranks every candidate by score alone.
	ModeScore
	// ModeEDF ranks by due time, oldest first: the index order freshq replaces.
	ModeEDF
	// ModeStrict serves lanes in strict priority (urgent, submitted, cold, discovered), each by
	// score. It starves the tail lanes; it is here to show that.
	ModeStrict
)

func (m Mode) String() string {
	switch m {
	case ModeLanes:
		return "ready+lanes"
	case ModeScore:
		return "ready"
	case ModeEDF:
		return "edf"
	case ModeStrict:
		return "strict"
	}
	return "unknown"
}

// Item is one candidate a Selector kept.
type Item[T any] struct {
	Score   float64
	DueAtMs int64
	Lane    Lane
	Value   T
	seq     uint64 // offer order: the last tie-break, so equal candidates keep index order
}

// Selector keeps the best K of any number of candidates in O(K) memory per lane, then orders
// them for publishing. Use Admits before building an expensive Value: most candidates of a large
// due set are never admitted. A Selector is not safe for concurrent use.
//
// In ModeLanes a lane keeps up to K rows, since any lane may have to fill the set alone, but
// Admits also turns away a row the interleave could not publish given the rows already kept
// (the lane bars, below), so a sweep reads about K rows, not K per lane. Turning such a row away
// never changes Result: see TestLaneBarsKeepTheResult.
type Selector[T any] struct {
	k      int
	mode   Mode
	shares Shares
	heaps  [NumLanes]minHeap[T] // ModeScore and ModeEDF use heaps[0] only
	seq    uint64
	bars   laneBars[T]
	// perLaneOnly: tests: admit by each lane's own K-th best alone, as the lane bars' reference.
	perLaneOnly bool
}

// laneBars are what a ModeLanes candidate must beat besides its own lane's K-th best. Each is
// the bar of a bound on the rows interleave takes from a lane within the set's K positions:
//
//   - Urgent takes at most ⌈UrgentMax·K⌉ while any other lane has rows; the other lanes run out
//     within K positions only if they hold fewer than K − ⌈UrgentMax·K⌉. So once they hold that
//     many, an urgent row outside urgent's best urgentCap is never published.
//   - A row of another lane is taken either as the best head of the non-urgent lanes, when
//     every better non-urgent row is already taken (so fewer than K are better), or because its
//     lane's floor falls due within K+1 positions (so fewer than ⌊share·(K+1)⌋ rows of its lane
//     are better). A row with K better non-urgent rows kept, outside its floor lane's best
//     floorCap, is never published.
//
// A row turned away would not even sway the interleave as an untaken head: a floor lane's head
// outside floorCap has its deadline past K+1, which neither forces nor orders a take, and any
// other head that is never taken is never the one compared. Each bar only rises as rows are
// offered (its heap's worst kept row only improves, and the other lanes' count only grows), so
// a candidate turned away stays turned away, which the sweep's class merge relies on.
type laneBars[T any] struct {
	nonUrgent minHeap[T]           // the best K rows of submitted, cold and discovered
	floor     [NumLanes]minHeap[T] // cold and discovered: each lane's best floorCap rows
	floorCap  [NumLanes]int
	urgent    minHeap[T] // urgent's best urgentCap rows
	urgentCap int
}

// NewSelector returns a selector that keeps at most k items (per lane, in the lane modes).
func NewSelector[T any](k int, mode Mode, shares Shares) *Selector[T] {
	s := &Selector[T]{k: max(k, 0), mode: mode, shares: shares}
	for i := range s.heaps {
		s.heaps[i].mode = mode
		s.bars.floor[i].mode = mode
	}
	s.bars.nonUrgent.mode = mode
	s.bars.urgent.mode = mode
	// The same float expressions interleave states its guarantees in, at the largest position
	// each can reach, so rounding cannot make a bar stricter than the interleave.
	s.bars.urgentCap = int(math.Ceil(shares.UrgentMax * float64(s.k)))
	s.bars.floorCap[LaneCold] = int(math.Floor(shares.ColdMin * float64(s.k+1)))
	s.bars.floorCap[LaneDiscovered] = int(math.Floor(shares.DiscoveredMin * float64(s.k+1)))
	return s
}

// Reset empties the selector, keeping its memory.
func (s *Selector[T]) Reset() {
	for i := range s.heaps {
		s.heaps[i].reset()
		s.bars.floor[i].reset()
	}
	s.bars.nonUrgent.reset()
	s.bars.urgent.reset()
	s.seq = 0
}

func (s *Selector[T]) heapFor(l Lane) *minHeap[T] {
	if s.mode == ModeScore || s.mode == ModeEDF || l >= NumLanes {
		return &s.heaps[0]
	}
	return &s.heaps[l]
}

// better reports whether a ranks above b.
func (s *Selector[T]) better(a, b *Item[T]) bool { return ranksAbove(s.mode, a, b) }

// ranksAbove reports whether a ranks above b in mode. It is a plain function, not a method
// value kept in each heap, so that the items compared never escape: Admits builds its
// candidate on the stack, and a warm selector allocates nothing per row offered.
func ranksAbove[T any](mode Mode, a, b *Item[T]) bool {
	if mode != ModeEDF && a.Score != b.Score {
		return a.Score > b.Score
	}
	if a.DueAtMs != b.DueAtMs {
		return a.DueAtMs < b.DueAtMs
	}
	return a.seq < b.seq
}

func sanitize(score float64) float64 {
	if math.IsNaN(score) || score < 0 {
		return 0 // a broken score must never rank a row first
	}
	return score
}

// Admits reports whether a candidate with these ranks could still be published: whether Offer
// would keep it now and, in ModeLanes, whether the lane bars let it through. A caller that does
// not offer what Admits refuses gets the same Result as one that offers everything.
func (s *Selector[T]) Admits(lane Lane, score float64, dueAtMs int64) bool {
	h := s.heapFor(lane)
	if s.k == 0 {
		return false
	}
	cand := Item[T]{Score: sanitize(score), DueAtMs: dueAtMs, seq: s.seq}
	if len(h.items) >= s.k && !s.better(&cand, &h.items[0]) {
		return false
	}
	if s.mode != ModeLanes || s.perLaneOnly || lane >= NumLanes {
		return true
	}
	b := &s.bars
	if lane == LaneUrgent {
		others := len(s.heaps[LaneSubmitted].items) + len(s.heaps[LaneCold].items) + len(s.heaps[LaneDiscovered].items)
		if others < s.k-b.urgentCap {
			return true // the other lanes may yet run out and leave urgent more of the set
		}
		return b.urgent.admits(b.urgentCap, &cand)
	}
	return b.nonUrgent.admits(s.k, &cand) || b.floor[lane].admits(b.floorCap[lane], &cand)
}

// Offer considers one candidate; it is kept if it ranks among the best k of its heap.
func (s *Selector[T]) Offer(lane Lane, score float64, dueAtMs int64, v T) {
	s.OfferEvict(lane, score, dueAtMs, v)
}

// OfferEvict is Offer, and says what became of the candidate: kept reports that it is among
// the best k now, and evicted, when ok, is the value it displaced (a caller that counts what
// the selector holds, such as the sweep's per-host cap, gives that value's place back).
func (s *Selector[T]) OfferEvict(lane Lane, score float64, dueAtMs int64, v T) (kept bool, evicted T, ok bool) {
	it := Item[T]{Score: sanitize(score), DueAtMs: dueAtMs, Lane: lane, Value: v, seq: s.seq}
	s.seq++
	if s.k == 0 {
		return false, evicted, false
	}
	h := s.heapFor(lane)
	if len(h.items) < s.k {
		h.push(it)
	} else if !s.better(&it, &h.items[0]) {
		return false, evicted, false
	} else {
		evicted, ok = h.items[0].Value, true
		h.replaceRoot(it)
	}
	if s.mode == ModeLanes && lane < NumLanes {
		s.bars.keep(lane, s.k, it)
	}
	return true, evicted, ok
}

// keep records a kept candidate in the bars of its lane; only its ranks are kept there.
func (b *laneBars[T]) keep(lane Lane, k int, it Item[T]) {
	var zero T
	it.Value = zero
	if lane == LaneUrgent {
		b.urgent.keepBest(b.urgentCap, it)
		return
	}
	b.nonUrgent.keepBest(k, it)
	b.floor[lane].keepBest(b.floorCap[lane], it)
}

// Result returns at most k kept items in publishing order: the order takes will hand them out.
// It leaves the selector empty, as Reset does, and keeps its memory for the next round: the
// returned slice is a new one, which later offers never touch.
func (s *Selector[T]) Result() []Item[T] {
	var lanes [NumLanes][]Item[T]
	total := 0
	for i := range s.heaps {
		lanes[i] = s.heaps[i].items
		slices.SortFunc(lanes[i], func(a, b Item[T]) int {
			if s.better(&a, &b) {
				return -1
			}
			if s.better(&b, &a) {
				return 1
			}
			return 0
		})
		total += len(lanes[i])
	}
	var out []Item[T]
	switch s.mode {
	case ModeScore, ModeEDF:
		out = slices.Clone(lanes[0])
	case ModeStrict:
		out = make([]Item[T], 0, min(total, s.k))
		for _, l := range []Lane{LaneUrgent, LaneSubmitted, LaneCold, LaneDiscovered} {
			out = append(out, lanes[l][:min(len(lanes[l]), s.k-len(out))]...)
		}
	default:
		out = s.interleave(lanes)
	}
	s.Reset()
	return out
}

// interleave builds the lanes-mode order so that every prefix, not only the whole set, honours
// the shares: takers consume a set from the front and may never reach its end before the next
// publish. In each prefix of length m, cold holds at least ⌊ColdMin·m⌋ and discovered at least
// ⌊DiscoveredMin·m⌋ while they have rows, and urgent at most ⌈UrgentMax·m⌉ while any other lane
// has rows (when none does, the cap would protect nobody). Each floor lane therefore has a
// deadline, the position by which its floor forces its next row; the two floor lanes are served
// earliest deadline first, as soon as their deadlines leave no slack, since both can fall due at
// the same position. Otherwise urgent goes first up to its cap, and then the best score among
// the other lanes.
func (s *Selector[T]) interleave(lanes [NumLanes][]Item[T]) []Item[T] {
	total := 0
	for _, l := range lanes {
		total += len(l)
	}
	out := make([]Item[T], 0, min(total, s.k))
	var taken [NumLanes]int
	head := func(l Lane) *Item[T] {
		if taken[l] < len(lanes[l]) {
			return &lanes[l][taken[l]]
		}
		return nil
	}
	take := func(l Lane) {
		out = append(out, lanes[l][taken[l]])
		taken[l]++
	}
	// deadline is the first position m at which lane l's floor requires one more row than it
	// has; math.MaxInt when it has no rows left or no floor. It is computed with the same
	// floor expression the guarantee is stated in, so float rounding cannot split them.
	deadline := func(l Lane, share float64) int {
		if share <= 0 || head(l) == nil {
			return math.MaxInt
		}
		need := float64(taken[l] + 1)
		d := max(1, int(math.Ceil(need/share)))
		for d > 1 && math.Floor(share*float64(d-1)) >= need {
			d--
		}
		for math.Floor(share*float64(d)) < need {
			d++
		}
		return d
	}
	for m := 1; len(out) < s.k && len(out) < total; m++ {
		first := LaneCold
		d1, d2 := deadline(LaneCold, s.shares.ColdMin), deadline(LaneDiscovered, s.shares.DiscoveredMin)
		if d2 < d1 {
			first, d1, d2 = LaneDiscovered, d2, d1
		}
		switch {
		case d1 <= m || (d2 != math.MaxInt && d2 <= m+1):
			take(first)
		case head(LaneUrgent) != nil && float64(taken[LaneUrgent]) < math.Ceil(s.shares.UrgentMax*float64(m)):
			take(LaneUrgent)
		default:
			best := Lane(NumLanes)
			for _, l := range []Lane{LaneSubmitted, LaneDiscovered, LaneCold} {
				if h := head(l); h != nil && (best == NumLanes || s.better(h, head(best))) {
					best = l
				}
			}
			if best == NumLanes {
				best = LaneUrgent // only urgent rows remain
			}
			take(best)
		}
	}
	return out
}

// minHeap is a binary heap whose root is the worst kept item, ranked as mode ranks.
type minHeap[T any] struct {
	items []Item[T]
	mode  Mode
}

// worse reports whether items[i] ranks below items[j].
func (h *minHeap[T]) worse(i, j int) bool { return ranksAbove(h.mode, &h.items[j], &h.items[i]) }

func (h *minHeap[T]) reset() {
	clear(h.items)
	h.items = h.items[:0]
}

// admits reports whether cand would be among the best n if offered to a heap kept to n items.
func (h *minHeap[T]) admits(n int, cand *Item[T]) bool {
	if len(h.items) < n {
		return true
	}
	return n > 0 && ranksAbove(h.mode, cand, &h.items[0])
}

// keepBest offers it to a heap kept to the best n items.
func (h *minHeap[T]) keepBest(n int, it Item[T]) {
	switch {
	case len(h.items) < n:
		h.push(it)
	case n > 0 && ranksAbove(h.mode, &it, &h.items[0]):
		h.replaceRoot(it)
	}
}

func (h *minHeap[T]) push(it Item[T]) {
	h.items = append(h.items, it)
	for i := len(h.items) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.worse(i, parent) {
			break
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

func (h *minHeap[T]) replaceRoot(it Item[T]) {
	h.items[0] = it
	n := len(h.items)
	for i := 0; ; {
		worst, l, r := i, 2*i+1, 2*i+2
		if l < n && h.worse(l, worst) {
			worst = l
		}
		if r < n && h.worse(r, worst) {
			worst = r
		}
		if worst == i {
			return
		}
		h.items[i], h.items[worst] = h.items[worst], h.items[i]
		i = worst
	}
}
