package shm

import (
	"sync/atomic"
	"unsafe"
)

// The lease table records which rows are being rendered, across all processes. A lease is what
// makes a take a grant: a row taken from the ready set (or the index) is rendered only by the
// process that leases it.
//
// Control line (64 bytes): refusals by cause, counted here so that every process's refusals
// land in one place.
//
//	0   refusedHeld       uint64  the key has an unexpired lease or is in its release grace
//	8   refusedFull       uint64  every slot in the key's window holds a live lease
//	16  refusedContended  uint64  another process acquired the same key at the same instant
//	24  gracesEvicted     uint64  release graces cut short to make room for a lease
//
// Then LeaseCapacity slots of 32 bytes:
//
//	0   state       uint64  expiry (40 bits: ms since the segment epoch) << 24 | released (1 bit) << 23 | version (23 bits)
//	8   keyHash     uint64  KeyHash of the leased key; 0 = never used
//	16  holder      uint64  caller-chosen id of the holder (pid<<16 | worker), for explain only
//	24  acquiredAt  int64   ms, for explain only
//
// A slot is live while its expiry is after now, and free otherwise, whatever key it last held. A
// live slot is a lease, or (released bit set) a release grace: the key of a finished render stays
// unclaimable for a moment, until its reschedule is visible to every path that could grant it.
// A key's lease may live in any of the LeaseWindow slots starting at its home slot,
// keyHash % LeaseCapacity.
//
// Acquire(h): scan the window; if a live slot holds h, refuse (held). Otherwise CAS the first
// free slot's state from the value seen to (now+ttl, version+1), then store h into it, then scan
// the window again: if another live slot holds h, someone acquired h concurrently, so back off
// (CAS the slot expired) and refuse (contended). When the window has no free slot, the grace
// that ends soonest is taken over: a grace protects against a duplicate render, never against a
// loss, so it must not cost capacity. Live leases are never overwritten; a window of live leases
// refuses (full). Each acquirer publishes its own slot before it
// looks for the other's, and Go's atomics are sequentially consistent (on x86 the CAS and the
// store are full fences), so of two concurrent acquirers of h at least one sees the other: at
// most one unexpired lease per key, across all processes.
//
// Release(lease): CAS the slot's state from exactly the state the lease was granted with to
// (now+grace, released, same version). If the lease lapsed and anyone re-acquired the slot, the version
// differs and the CAS fails: a release can never shorten somebody else's newer lease. A lease
// whose holder was killed simply lapses at its expiry.
//
// The version has 23 bits: a stale holder could release a re-acquired slot only if that slot
// were acquired exactly 2^23 times while the holder stalled, at a lapsed lease's expiry.
type Leases struct {
	refusedHeld, refusedFull, refusedContended, gracesEvicted *uint64

	slots    unsafe.Pointer // slot 0
	capacity uint64
	window   uint64
	epochMs  int64
}

const (
	expiryBits  = 40
	expiryShift = 24
	releasedBit = 1 << 23
	versionMask = releasedBit - 1
	maxRelative = 1<<expiryBits - 1 // ~34.8 years after the epoch
)

// Lease is a granted lease. Keep it to release or extend; it is a plain value, safe to copy
// between goroutines (not between processes: the holder owns it).
type Lease struct {
	Slot    uint32
	State   uint64
	KeyHash uint64
}

// expiresRel is the lease's expiry in the table's relative form.
func (l Lease) expiresRel() uint64 { return l.State >> expiryShift }

// AcquireStatus is the outcome of Acquire.
type AcquireStatus uint8

const (
	Acquired  AcquireStatus = iota
	Held                    // the key has an unexpired lease or release grace
	Full                    // the key's whole window is live; the table never overwrites
	Contended               // another process acquired the same key at the same time
)

func (s AcquireStatus) String() string {
	switch s {
	case Acquired:
		return "acquired"
	case Held:
		return "held"
	case Full:
		return "full"
	case Contended:
		return "contended"
	}
	return "unknown"
}

func (l *Leases) init(s *Segment) {
	base := s.layout.lease.off
	l.refusedHeld = s.word(base)
	l.refusedFull = s.word(base + 8)
	l.refusedContended = s.word(base + 16)
	l.gracesEvicted = s.word(base + 24)
	l.slots = unsafe.Pointer(s.word(base + lineSize))
	l.capacity = uint64(s.layout.LeaseCapacity)
	l.window = uint64(s.layout.LeaseWindow)
	l.epochMs = s.layout.EpochMs
}

// rel converts an absolute ms time to the 40-bit relative form, saturating at both ends.
func (l *Leases) rel(ms int64) uint64 {
	d := ms - l.epochMs
	if d <= 0 {
		return 0
	}
	return min(uint64(d), maxRelative)
}

// packState builds a state word; version is taken from its low 23 bits.
func packState(rel uint64, released bool, version uint64) uint64 {
	st := rel<<expiryShift | version&versionMask
	if released {
		st |= releasedBit
	}
	return st
}

// leaseSlot mirrors a slot's 32 bytes; its fields are only accessed atomically.
type leaseSlot struct {
	state, hash, holder, acquiredAt uint64
}

// slot returns slot i; i < capacity always holds, because every index comes from next.
func (l *Leases) slot(i uint64) *leaseSlot {
	return (*leaseSlot)(unsafe.Add(l.slots, i*leaseSlotSize))
}

// next is the slot after i in a window, wrapping at the end of the table. Stepping instead of
// taking i % capacity per slot keeps a 64-bit division out of every probe.
func (l *Leases) next(i uint64) uint64 {
	if i++; i == l.capacity {
		return 0
	}
	return i
}

// Acquire leases keyHash until nowMs+ttlMs for holder. It never waits and never overwrites a
// live lease: a refusal says why (Held, Full, Contended) and is counted.
func (l *Leases) Acquire(keyHash uint64, nowMs, ttlMs int64, holder uint64) (Lease, AcquireStatus) {
	relNow := l.rel(nowMs)
	home := keyHash % l.capacity
	for range 4 { // a lost CAS on a free slot means another key took it; look again
		free, freeState, found := uint64(0), uint64(0), false
		grace, graceState, graceFound := uint64(0), uint64(0), false
		for i, j := home, uint64(0); j < l.window; i, j = l.next(i), j+1 {
			sl := l.slot(i)
			h := atomic.LoadUint64(&sl.hash)
			st := atomic.LoadUint64(&sl.state)
			if exp := st >> expiryShift; exp > relNow {
				if h == keyHash {
					atomic.AddUint64(l.refusedHeld, 1)
					return Lease{}, Held
				}
				if st&releasedBit != 0 && (!graceFound || exp < graceState>>expiryShift) {
					grace, graceState, graceFound = i, st, true
				}
				continue
			}
			// Prefer the key's own lapsed slot, so one key does not spread over its window.
			if !found || h == keyHash {
				free, freeState, found = i, st, true
			}
		}
		evicting := false
		if !found {
			if !graceFound {
				atomic.AddUint64(l.refusedFull, 1)
				return Lease{}, Full
			}
			free, freeState, evicting = grace, graceState, true
		}
		mine := packState(l.rel(nowMs+ttlMs), false, freeState+1)
		sl := l.slot(free)
		if !atomic.CompareAndSwapUint64(&sl.state, freeState, mine) {
			continue
		}
		if evicting {
			atomic.AddUint64(l.gracesEvicted, 1)
		}
		atomic.StoreUint64(&sl.hash, keyHash)
		atomic.StoreUint64(&sl.holder, holder)
		atomic.StoreUint64(&sl.acquiredAt, uint64(nowMs))
		if l.liveElsewhere(keyHash, home, free, relNow) {
			atomic.CompareAndSwapUint64(&sl.state, mine, packState(0, false, mine))
			atomic.AddUint64(l.refusedContended, 1)
			return Lease{}, Contended
		}
		return Lease{Slot: uint32(free), State: mine, KeyHash: keyHash}, Acquired
	}
	atomic.AddUint64(l.refusedContended, 1)
	return Lease{}, Contended
}

// liveElsewhere reports whether a slot other than mine in keyHash's window holds it live.
// The hash is read before the state: the acquirer stores its state before its hash, so seeing
// its hash guarantees seeing its live state.
func (l *Leases) liveElsewhere(keyHash, home, mine, relNow uint64) bool {
	for i, j := home, uint64(0); j < l.window; i, j = l.next(i), j+1 {
		sl := l.slot(i)
		if i != mine && atomic.LoadUint64(&sl.hash) == keyHash && atomic.LoadUint64(&sl.state)>>expiryShift > relNow {
			return true
		}
	}
	return false
}

// Release ends lease at nowMs. The key stays unclaimable for graceMs more (the commit-visibility
// grace: until the result's reschedule is visible to the next sweep); 0 frees it at once.
// It reports false, and changes nothing, if the lease had already lapsed or been released:
// a release never touches a lease it does not hold.
func (l *Leases) Release(lease Lease, nowMs, graceMs int64) bool {
	if lease.expiresRel() <= l.rel(nowMs) {
		return false
	}
	return atomic.CompareAndSwapUint64(&l.slot(uint64(lease.Slot)).state, lease.State,
		packState(l.rel(nowMs+graceMs), true, lease.State))
}

// Extend moves a held lease's expiry to nowMs+ttlMs, for a render that outlives its TTL. It
// reports false if the lease had lapsed or been released; the caller no longer holds the row.
func (l *Leases) Extend(lease *Lease, nowMs, ttlMs int64) bool {
	if lease.expiresRel() <= l.rel(nowMs) {
		return false
	}
	next := packState(l.rel(nowMs+ttlMs), false, lease.State)
	if !atomic.CompareAndSwapUint64(&l.slot(uint64(lease.Slot)).state, lease.State, next) {
		return false
	}
	lease.State = next
	return true
}

// LeaseInfo describes a live lease, for explain and /v1/queue.
type LeaseInfo struct {
	KeyHash      uint64
	Holder       uint64
	AcquiredAtMs int64
	ExpiresAtMs  int64
	Released     bool // a release grace, not a lease: the render finished
}

// Lookup returns the live lease (or release grace) on keyHash at nowMs, if any.
func (l *Leases) Lookup(keyHash uint64, nowMs int64) (LeaseInfo, bool) {
	relNow := l.rel(nowMs)
	home := keyHash % l.capacity
	for i, j := home, uint64(0); j < l.window; i, j = l.next(i), j+1 {
		sl := l.slot(i)
		if atomic.LoadUint64(&sl.hash) != keyHash {
			continue
		}
		if st := atomic.LoadUint64(&sl.state); st>>expiryShift > relNow {
			return l.info(sl, st), true
		}
	}
	return LeaseInfo{}, false
}

func (l *Leases) info(sl *leaseSlot, st uint64) LeaseInfo {
	return LeaseInfo{
		KeyHash:      atomic.LoadUint64(&sl.hash),
		Holder:       atomic.LoadUint64(&sl.holder),
		AcquiredAtMs: int64(atomic.LoadUint64(&sl.acquiredAt)),
		ExpiresAtMs:  l.epochMs + int64(st>>expiryShift),
		Released:     st&releasedBit != 0,
	}
}

// LeaseStats counts live slots and refusals.
type LeaseStats struct {
	Capacity         int
	Live             int // unexpired leases at the time of the scan
	Graces           int // unexpired release graces
	RefusedHeld      uint64
	RefusedFull      uint64
	RefusedContended uint64
	GracesEvicted    uint64
}

// Stats scans the whole table; it is for /v1/queue and /metrics, not for a hot path.
func (l *Leases) Stats(nowMs int64) LeaseStats {
	st := LeaseStats{
		Capacity:         int(l.capacity),
		RefusedHeld:      atomic.LoadUint64(l.refusedHeld),
		RefusedFull:      atomic.LoadUint64(l.refusedFull),
		RefusedContended: atomic.LoadUint64(l.refusedContended),
		GracesEvicted:    atomic.LoadUint64(l.gracesEvicted),
	}
	relNow := l.rel(nowMs)
	for i := range l.capacity {
		if s := atomic.LoadUint64(&l.slot(i).state); s>>expiryShift > relNow {
			if s&releasedBit != 0 {
				st.Graces++
			} else {
				st.Live++
			}
		}
	}
	return st
}
