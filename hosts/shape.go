package hosts

import (
	"slices"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
)

// The sweep's half of politeness: Shaper applies each host's allowance to a pass that selects
// a ready set. A take refuses a row whose host is paused or at its limit of renders in flight
// (Admit), but the take has consumed the entry: a set full of one throttled host's rows would
// be eaten by refusals, and every other host starved until the next sweep. So the sweep shapes
// the set:
//
//   - a paused host has no entry in it (its rows stay due; the sweep runs again when the pause
//     ends, see sweep.Result.HostResumeMs);
//   - a host has at most ⌈EntrySlack · K · limit / S⌉ entries in a set of K, where limit is
//     its limit of renders in flight now and S the node's render slots (render workers ×
//     render.concurrency): the share of the set that matches the share of the farm the host
//     may use, with slack for renders of uneven length (Allowance.EntryCap). A host whose share
//     reaches the whole set is not capped.
//
// The cap is applied as rows are offered: a host at its cap gets no more candidates in this
// pass, and a row of it that a better row evicts from the selector frees its place. The pass
// reads rows in due order, not in rank, so the rows a host got first are its oldest-due, not
// its best (a home page an hour late on 1 h comes after products a day late on 48 h): the
// rows refused at the cap are kept in the host's own bounded selector (its best cap of them),
// and once the set is chosen, Promote puts each of them in place of a worse published entry
// of the same host. A take may still refuse an entry of a host that is full at that instant;
// what that costs is bounded by the cap.
//
// The cap bounds how many entries a host has, Spread bounds where they are: takes consume a
// set from the front, and a host with a backlog has the best scores, so its capped entries
// would all come first, every claim would meet only them while the host is full, and its
// entries would be spent before its slots free. Spread moves a capped host's entries back so
// that every prefix of the set holds at most its limit plus its share of the prefix: the other
// hosts are served from the first take, and the host finds entries all through the set's life.

// Plan is what a pass decided for one host.
type Plan[V any] struct {
	// PausedUntil > the pass's now: the host is paused; its rows are left out.
	PausedUntil int64
	cap         int     // entries the set may hold; 0 = no cap
	held        int     // entries the selector holds now
	limit       int     // renders in flight the host allows now
	share       float64 // cap ÷ the set's capacity: its share of any prefix of the set (Spread)
	placed      int     // entries Spread has placed
	// overflow holds the best cap of the rows refused at the cap (Promote); nil until one is.
	overflow *policy.Selector[V]
	// site and rows are the host's name and its rows the pass offered (Of): its demand, which
	// the node publishes for the division of the host's limit (ReportDemand). heldByFarm: the
	// host's share on this node is 0 now.
	site       string
	rows       int
	heldByFarm bool
}

// Full reports whether the host holds its cap of the set: a further row of it is refused.
func (p *Plan[V]) Full() bool { return p.cap > 0 && p.held >= p.cap }

// Hold counts a row of the host the selector kept.
func (p *Plan[V]) Hold() { p.held++ }

// Shaper is one pass's plans, one per host, with V the value the pass's selector keeps per
// row. The host table is read once per host, not once per row. It is used by one goroutine.
type Shaper[V any] struct {
	seg    *shm.Segment
	limits *Limits // render.hosts
	now    int64
	k      int // the set's capacity
	slots  int // the node's render slots
	hostOf func(V) uint64
	own    func(V) V
	plans  map[uint64]*Plan[V]
}

// NewShaper returns the plans of a pass at now that selects a set of k entries for a node of
// slots render slots under limits. hostOf returns the host hash (shm.HostHash of the site)
// of a value; own returns a value the Shaper may keep past the offer (a row refused at its
// host's cap is kept only if it ranks among the host's best, and owned only then).
func NewShaper[V any](seg *shm.Segment, limits *Limits, k, slots int, now int64, hostOf func(V) uint64, own func(V) V) *Shaper[V] {
	return &Shaper[V]{seg: seg, limits: limits, now: now, k: k, slots: max(1, slots), hostOf: hostOf, own: own, plans: map[uint64]*Plan[V]{}}
}

// Of returns the host hash of key's site and its plan.
func (h *Shaper[V]) Of(key []byte) (uint64, *Plan[V]) {
	host := h.limits.Site(key)
	hash := shm.HostHash(host)
	if p, ok := h.plans[hash]; ok {
		p.rows++
		return hash, p
	}
	a := Of(h.seg, h.limits, host, h.now)
	p := &Plan[V]{limit: a.Limit, PausedUntil: a.PausedUntilMs, site: string(host), rows: 1, heldByFarm: a.HeldByFarm}
	if p.cap = a.EntryCap(h.k, h.slots); p.cap > 0 {
		p.share = float64(p.cap) / float64(h.k)
	}
	h.plans[hash] = p
	return hash, p
}

// Settled returns the class merge's early stop: a check that every host of stored (the hosts
// the pass may hold rows of, as keys spell them: store.HostLister) is paused or holds its cap
// of the set, so that no row left to read could enter it (a capped host's further rows are
// refused before they are offered, so nothing is evicted either). A host none of whose rows
// was offered yet has no plan and is not settled. It is nil, and the merge reads on, when
// stored is empty.
func (h *Shaper[V]) Settled(stored []string) func() bool {
	if len(stored) == 0 {
		return nil
	}
	hashes := make([]uint64, len(stored))
	for i, host := range stored {
		// The store lists hosts as keys spell them; plans are kept by site.
		hashes[i] = shm.HostHash([]byte(h.limits.Sites.Of([]byte(host))))
	}
	return func() bool {
		for _, hash := range hashes {
			p, ok := h.plans[hash]
			if !ok || !(p.PausedUntil > h.now || p.cap > 0 && p.held >= p.cap) {
				return false
			}
			if p.heldByFarm && p.rows < DemandProbe {
				return false // a host this node holds no share of: count its demand first
			}
		}
		return true
	}
}

// DemandProbe is how many rows of a host whose share on the node is 0 a pass reads before it
// stops at the host (Settled): the demand the node publishes for it (ReportDemand), which is
// how it gets a share of the host's limit while other nodes hold it all.
const DemandProbe = 64

// ReportDemand gives the rows due the pass offered per host to the farm of the node, if it is
// in one (Farm.ReportDemand): what a division that follows demand divides the hosts' limits by.
// A pass that stopped at a host early counts the rows it read of it.
func (h *Shaper[V]) ReportDemand() {
	f, ok := demandSinks.Load(h.seg)
	if !ok {
		return
	}
	rows := make(map[string]int, len(h.plans))
	for _, p := range h.plans {
		rows[p.site] = p.rows
	}
	f.(*Farm).ReportDemand(rows)
}

// Release gives back the place of an evicted row of host hash.
func (h *Shaper[V]) Release(hash uint64) {
	if p, ok := h.plans[hash]; ok && p.held > 0 {
		p.held--
	}
}

// room reports whether a host may have one more entry at position m of the set: always for a
// host without a cap, else while it has placed fewer than its limit plus its share of m.
func (p *Plan[V]) room(m int) bool {
	return p.cap == 0 || p.placed < p.limit+int(p.share*float64(m))
}

// Spread reorders a set (in publishing order) so that each capped host has room at every
// position it holds (Plan.room). An entry without room waits, and goes at the first position
// its host has room, before the entries ranked after it; when only waiting entries are left,
// they go in the order they waited. The order is otherwise kept, and so is every entry.
func (h *Shaper[V]) Spread(items []policy.Item[V]) []policy.Item[V] {
	out := make([]policy.Item[V], 0, len(items))
	waiting := map[uint64][]policy.Item[V]{}
	var hosts []uint64 // hosts with waiting entries, in the order they began to wait
	place := func(it policy.Item[V]) {
		out = append(out, it)
		h.plans[h.hostOf(it.Value)].placed++
	}
	next := 0
	for len(out) < len(items) {
		if i := slices.IndexFunc(hosts, func(host uint64) bool { return h.plans[host].room(len(out)) }); i >= 0 {
			host := hosts[i]
			place(waiting[host][0])
			if waiting[host] = waiting[host][1:]; len(waiting[host]) == 0 {
				hosts = slices.Delete(hosts, i, i+1)
			}
			continue
		}
		if next == len(items) { // no host with waiting entries has room: the earliest goes
			host := hosts[0]
			place(waiting[host][0])
			if waiting[host] = waiting[host][1:]; len(waiting[host]) == 0 {
				hosts = hosts[1:]
			}
			continue
		}
		it := items[next]
		next++
		host := h.hostOf(it.Value)
		if h.plans[host].room(len(out)) {
			place(it)
			continue
		}
		if len(waiting[host]) == 0 {
			hosts = append(hosts, host)
		}
		waiting[host] = append(waiting[host], it)
	}
	return out
}

// Refuse keeps a row refused at its host's cap among the host's best refused rows, for
// Promote. v is owned (NewShaper's own) only if the row is kept.
func (h *Shaper[V]) Refuse(p *Plan[V], mode policy.Mode, lane policy.Lane, score float64, dueAtMs int64, v V) {
	if p.overflow == nil {
		if mode != policy.ModeEDF {
			mode = policy.ModeScore // one heap, ranked as the set is
		}
		p.overflow = policy.NewSelector[V](p.cap, mode, policy.Shares{})
	}
	if p.overflow.Admits(lane, score, dueAtMs) {
		p.overflow.Offer(lane, score, dueAtMs, h.own(v))
	}
}

// outranks reports whether a ranks strictly above b in mode: by score (then due time), or by
// due time alone in ModeEDF. Equal ranks do not outrank, so Promote never swaps equals.
func outranks[V any](mode policy.Mode, a, b *policy.Item[V]) bool {
	if mode != policy.ModeEDF && a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.DueAtMs < b.DueAtMs
}

// Promote puts each capped host's best refused rows in place of its worst published entries
// that they outrank, one for one, and returns how many it put in. The set's size and each
// host's count in it are unchanged; so is every other host's entry.
func (h *Shaper[V]) Promote(items []policy.Item[V], mode policy.Mode) int {
	better := func(a, b *policy.Item[V]) bool { return outranks(mode, a, b) }
	var hosts []uint64 // hosts with refused rows, in the order they first appear in the set
	published := map[uint64][]int{}
	for i := range items {
		host := h.hostOf(items[i].Value)
		if h.plans[host].overflow == nil {
			continue
		}
		if _, seen := published[host]; !seen {
			hosts = append(hosts, host)
		}
		published[host] = append(published[host], i)
	}
	promoted := 0
	for _, host := range hosts {
		worstFirst := published[host]
		slices.SortStableFunc(worstFirst, func(a, b int) int {
			switch {
			case better(&items[b], &items[a]):
				return -1
			case better(&items[a], &items[b]):
				return 1
			}
			return 0
		})
		for k, best := range h.plans[host].overflow.Result() { // best first
			if k == len(worstFirst) || !better(&best, &items[worstFirst[k]]) {
				break
			}
			items[worstFirst[k]] = best
			promoted++
		}
	}
	return promoted
}
