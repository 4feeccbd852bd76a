package hosts

import (
	"github.com/freshq/freshq/shm"
)

// Allowance is what one host may do on this node now: the one answer every taker (claim's
// ready path and index fallback), the sweep's shaping of the set, the Tracker's log and the
// views (/v1/queue, freshqctl top, the host metrics) read, so that they never disagree.
type Allowance struct {
	// Max is the host's configured maximum of renders in flight (render.hosts.max_concurrency
	// or its override), bounded by Clamp: the range of host tokens its renders may hold.
	Max int
	// Share is the node's part of Max in its farm (farm.go): Max on a node alone.
	Share int
	// Limit is how many renders of the host may be in flight on this node now: its Share,
	// lowered by the host's errors (Step). 0 only when its Share is.
	Limit int
	// Paused is true while no render of the host may start on this node, until PausedUntilMs:
	// a refusal's pause, or (HeldByFarm) a share of 0 until it may grow.
	Paused        bool
	PausedUntilMs int64
	HeldByFarm    bool
}

// Allow is the allowance at nowMs of the host whose hash is hash: the host table's state of it
// (st; found false: the host is at its defaults) under its configured maximum maxInFlight,
// divided by the node's farm membership (farm; the zero Membership: a node alone). It is the one
// place where a host's limit is computed: every other answer (Of, Admit, EntryCap, Rows)
// derives from it.
func Allow(hash uint64, st shm.HostState, found bool, maxInFlight int, farm Membership, nowMs int64) Allowance {
	a := Allowance{Max: Clamp(maxInFlight)}
	var growsAt int64
	a.Share, growsAt = farmShare(farm, a.Max, hash, nowMs)
	a.Limit = a.Share
	if found {
		if st.Limit > 0 && int(st.Limit) < a.Limit {
			a.Limit = int(st.Limit)
		}
		if nowMs < st.PausedUntilMs {
			a.Paused, a.PausedUntilMs = true, st.PausedUntilMs
		}
	}
	if a.Share == 0 && !a.Paused {
		a.Paused, a.PausedUntilMs, a.HeldByFarm = true, growsAt, true
	}
	return a
}

// Of reads host's allowance from the segment's host table at nowMs under cfg (render.hosts).
// Any process may call it; it never blocks.
func Of(seg *shm.Segment, cfg *Limits, host []byte, nowMs int64) Allowance {
	hash := shm.HostHash(host)
	st, found := seg.Hosts().Load(hash)
	return Allow(hash, st, found, cfg.Max(host), membershipOfHost(seg, hash), nowMs)
}

// Admit takes a render slot of the host of key for holder, for ttlMs: none while the host is
// paused, none past its limit of renders in flight, across every process of the node, since
// each slot is a host token of the lease table (AdmitToken). ok is false when the
// host refuses; nothing is then held.
func Admit(seg *shm.Segment, cfg *Limits, key []byte, nowMs, ttlMs int64, holder uint64) (token shm.Lease, ok bool) {
	host := cfg.Site(key)
	a := Of(seg, cfg, host, nowMs)
	if a.Paused {
		return shm.Lease{}, false
	}
	return AdmitToken(seg.Leases(), shm.HostHash(host), a.Limit, shm.KeyHash(key), nowMs, ttlMs, holder)
}

// Tokens is the range of host tokens (0..Tokens-1) a render of host may hold under cfg: its
// configured maximum. A release or an extension of a holder's token looks there, whatever the
// host's limit is now (a token taken before the limit was lowered is still below Max).
func Tokens(cfg *Limits, host []byte) int { return Clamp(cfg.Max(host)) }

// EntrySlack is the multiple of its fair share of the ready set a host may hold (EntryCap).
const EntrySlack = 2

// EntryCap is how many entries a host whose allowance is a may have in a ready set of k
// entries, on a node of slots render slots (render workers × render.concurrency): its share of
// the set matches its share of the farm's slots, ⌈EntrySlack · k · Limit / slots⌉, and never
// fewer than Limit. 0 means no cap: its share reaches the whole set. A paused host has no
// entry at all; the caller leaves it out before it asks.
func (a Allowance) EntryCap(k, slots int) int {
	slots = max(slots, 1)
	c := (EntrySlack*k*a.Limit + slots - 1) / slots
	if c >= k {
		return 0
	}
	return max(c, a.Limit)
}
