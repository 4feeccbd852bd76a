package sweep

import (
	"bytes"
	"slices"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// The sweep's half of politeness. Package hosts answers for each host how many renders it may
// have in flight and how many entries it may hold in the set (hosts.Allowance); this file
// applies those answers to a pass. A take refuses a row whose host is paused or at its limit of
// renders in flight (hosts.Admit), but the take has consumed the entry: a set full of one
// throttled host's rows would be eaten by refusals, and every other host starved until the
// next sweep. So the sweep shapes the set:
//
//   - a paused host has no entry in it (its rows stay due; the sweep runs again when the pause
//     ends, see Result.HostResumeMs);
//   - a host has at most ⌈hostShareSlack · K · limit / S⌉ entries in a set of K, where limit is
//     its limit of renders in flight now and S the node's render slots (render workers ×
//     render.concurrency): the share of the set that matches the share of the farm the host
//     may use, with slack for renders of uneven length. A host whose share reaches the whole
//     set is not capped.
//
// The cap is applied as rows are offered: a host at its cap gets no more candidates in this
// pass, and a row of it that a better row evicts from the selector frees its place. The pass
// reads rows in due order, not in rank, so the rows a host got first are its oldest-due, not
// its best (a home page an hour late on 1 h comes after products a day late on 48 h): the
// rows refused at the cap are kept in the host's own bounded selector (its best cap of them),
// and once the set is chosen, promote puts each of them in place of a worse published entry
// of the same host. A take may still refuse an entry of a host that is full at that instant;
// what that costs is bounded by the cap.
//
// The cap bounds how many entries a host has, spread bounds where they are: takes consume a
// set from the front, and a host with a backlog has the best scores, so its capped entries
// would all come first, every claim would meet only them while the host is full, and its
// entries would be spent before its slots free. spread moves a capped host's entries back so
// that every prefix of the set holds at most its limit plus its share of the prefix: the other
// hosts are served from the first take, and the host finds entries all through the set's life.

// hostPlan is what the sweep decided for one host in this pass.
type hostPlan struct {
	pausedUntil int64   // > now: the host is paused; its rows are left out
	cap         int     // entries the set may hold; 0 = no cap
	held        int     // entries the selector holds now
	limit       int     // renders in flight the host allows now
	share       float64 // cap ÷ the set's capacity: its share of any prefix of the set (spread)
	placed      int     // entries spread has placed
	// overflow holds the best cap of the rows refused at the cap (promote); nil until one is.
	overflow *policy.Selector[value]
}

// hostPlans caches each host's plan for one pass: the host table is read once per host, not
// once per row.
type hostPlans struct {
	seg   *shm.Segment
	hosts *hosts.Limits // render.hosts
	now   int64
	k     int // the set's capacity
	slots int // the node's render slots
	plans map[uint64]*hostPlan
}

func newHostPlans(seg *shm.Segment, set *Settings, k int, now int64) *hostPlans {
	slots := max(1, set.RenderSlots)
	return &hostPlans{seg: seg, hosts: &set.Hosts, now: now, k: k, slots: slots, plans: map[uint64]*hostPlan{}}
}

// of returns the host of key's hash and its plan.
func (h *hostPlans) of(key []byte) (uint64, *hostPlan) {
	host := h.hosts.Site(key)
	hash := shm.HostHash(host)
	if p, ok := h.plans[hash]; ok {
		return hash, p
	}
	a := hosts.Of(h.seg, h.hosts, host, h.now)
	p := &hostPlan{limit: a.Limit, pausedUntil: a.PausedUntilMs}
	if p.cap = a.EntryCap(h.k, h.slots); p.cap > 0 {
		p.share = float64(p.cap) / float64(h.k)
	}
	h.plans[hash] = p
	return hash, p
}

// settled returns the class merge's early stop (readClasses): a check that every host pass
// may hold rows of (store.HostLister) is paused or holds its cap of the set, so that no row
// left to read could enter it (a capped host's further rows are refused before they are
// offered, so nothing is evicted either). A host none of whose rows was offered yet has no
// plan and is not settled. It is nil, and the merge reads on, when the store cannot list its
// hosts.
func (h *hostPlans) settled(pass any) func() bool {
	lister, ok := pass.(store.HostLister)
	if !ok {
		return nil
	}
	hosts, ok := lister.StoredHosts()
	if !ok || len(hosts) == 0 {
		return nil
	}
	hashes := make([]uint64, len(hosts))
	for i, host := range hosts {
		// The store lists hosts as keys spell them; plans are kept by site.
		hashes[i] = shm.HostHash([]byte(h.hosts.Sites.Of([]byte(host))))
	}
	return func() bool {
		for _, hash := range hashes {
			p, ok := h.plans[hash]
			if !ok || !(p.pausedUntil > h.now || p.cap > 0 && p.held >= p.cap) {
				return false
			}
		}
		return true
	}
}

// release gives back the place of an evicted row of host hash.
func (h *hostPlans) release(hash uint64) {
	if p, ok := h.plans[hash]; ok && p.held > 0 {
		p.held--
	}
}

// room reports whether a host may have one more entry at position m of the set: always for a
// host without a cap, else while it has placed fewer than its limit plus its share of m.
func (p *hostPlan) room(m int) bool {
	return p.cap == 0 || p.placed < p.limit+int(p.share*float64(m))
}

// spread reorders a set (in publishing order) so that each capped host has room at every
// position it holds (hostPlan.room). An entry without room waits, and goes at the first
// position its host has room, before the entries ranked after it; when only waiting entries
// are left, they go in the order they waited. The order is otherwise kept, and so is every
// entry.
func (h *hostPlans) spread(items []policy.Item[value]) []policy.Item[value] {
	out := make([]policy.Item[value], 0, len(items))
	waiting := map[uint64][]policy.Item[value]{}
	var hosts []uint64 // hosts with waiting entries, in the order they began to wait
	place := func(it policy.Item[value]) {
		out = append(out, it)
		h.plans[it.Value.host].placed++
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
		if h.plans[it.Value.host].room(len(out)) {
			place(it)
			continue
		}
		if len(waiting[it.Value.host]) == 0 {
			hosts = append(hosts, it.Value.host)
		}
		waiting[it.Value.host] = append(waiting[it.Value.host], it)
	}
	return out
}

// refuse keeps a row refused at its host's cap among the host's best refused rows, for promote.
// key is cloned only if the row is kept.
func (h *hostPlans) refuse(p *hostPlan, mode policy.Mode, lane policy.Lane, score float64, dueAtMs int64, v value) {
	if p.overflow == nil {
		if mode != policy.ModeEDF {
			mode = policy.ModeScore // one heap, ranked as the set is
		}
		p.overflow = policy.NewSelector[value](p.cap, mode, policy.Shares{})
	}
	if p.overflow.Admits(lane, score, dueAtMs) {
		v.key = bytes.Clone(v.key)
		p.overflow.Offer(lane, score, dueAtMs, v)
	}
}

// outranks reports whether a ranks strictly above b in mode: by score (then due time), or by
// due time alone in ModeEDF. Equal ranks do not outrank, so promote never swaps equals.
func outranks(mode policy.Mode, a, b *policy.Item[value]) bool {
	if mode != policy.ModeEDF && a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.DueAtMs < b.DueAtMs
}

// promote puts each capped host's best refused rows in place of its worst published entries
// that they outrank, one for one, and returns how many it put in. The set's size and each
// host's count in it are unchanged; so is every other host's entry.
func (h *hostPlans) promote(items []policy.Item[value], mode policy.Mode) int {
	better := func(a, b *policy.Item[value]) bool { return outranks(mode, a, b) }
	var hosts []uint64 // hosts with refused rows, in the order they first appear in the set
	published := map[uint64][]int{}
	for i := range items {
		host := items[i].Value.host
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
