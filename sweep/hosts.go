package sweep

import (
	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/shm"
)

// The sweep's half of politeness. A take refuses a row whose host is paused or at its limit of
// renders in flight (claim.AdmitHost), but the take has consumed the entry: a set full of one
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
// The cap is applied as rows are offered: a host at its cap admits no more rows in this pass
// (the pass reads rows in due order, so those it has are its oldest-due), and a row of it that
// a better row evicts from the selector frees its place. A take may still refuse an entry of a
// host that is full at that instant; what that costs is bounded by the cap.

// hostShareSlack is the multiple of its fair share of the set a host may hold.
const hostShareSlack = 2

// hostPlan is what the sweep decided for one host in this pass.
type hostPlan struct {
	pausedUntil int64 // > now: the host is paused; its rows are left out
	cap         int   // entries the set may hold; 0 = no cap
	held        int   // entries the selector holds now
}

// hostPlans caches each host's plan for one pass: the host table is read once per host, not
// once per row.
type hostPlans struct {
	seg   *shm.Segment
	hosts *config.Hosts
	now   int64
	k     int // the set's capacity
	slots int // the node's render slots
	plans map[uint64]*hostPlan
}

func newHostPlans(seg *shm.Segment, cfg *config.Config, k int, now int64) *hostPlans {
	slots := max(1, (cfg.Workers-1)*cfg.Render.Concurrency)
	return &hostPlans{seg: seg, hosts: &cfg.Render.Hosts, now: now, k: k, slots: slots, plans: map[uint64]*hostPlan{}}
}

// of returns the host of key's hash and its plan.
func (h *hostPlans) of(key []byte) (uint64, *hostPlan) {
	host := cachekey.Host(key)
	hash := shm.HostHash(host)
	if p, ok := h.plans[hash]; ok {
		return hash, p
	}
	limit := h.hosts.Max(host)
	p := &hostPlan{}
	if st, ok := h.seg.Hosts().Load(hash); ok {
		var paused bool
		if limit, paused = st.Allowance(limit, h.now); paused {
			p.pausedUntil = st.PausedUntilMs
		}
	}
	if c := (hostShareSlack*h.k*limit + h.slots - 1) / h.slots; c < h.k {
		p.cap = max(c, limit)
	}
	h.plans[hash] = p
	return hash, p
}

// release gives back the place of an evicted row of host hash.
func (h *hostPlans) release(hash uint64) {
	if p, ok := h.plans[hash]; ok && p.held > 0 {
		p.held--
	}
}
