package shm

import (
	"fmt"
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
// Release(lease): CAS the slot's state from the state of the grant (the one it was granted with,
// or the one an Extend of the same grant moved it to: same version, not released) to
// (now+grace, released, same version). If the lease lapsed and anyone re-acquired the slot, the
// version differs and the CAS fails: a release can never shorten somebody else's newer lease. A
// lease that lapsed but whose slot nobody took is marked released where it lies, its expiry
// unchanged (so no live slot is created): either way the grant's state never comes back. A
// lease whose holder was killed simply lapses at its expiry.
//
// Check(lease, h): the lease is the slot's grant now iff the slot's state is exactly the
// lease's, unexpired and not released, and the slot holds h. Since only Acquire writes an
// unreleased state, and it always moves the version on, a slot that was released, revoked or
// re-acquired never matches an older lease again (until 2^23 acquisitions of that one slot).
// A lease from outside the process is checked for range (ErrLeaseSlot) and key (ErrLeaseKey)
// before any slot is touched; Release and Extend refuse the same leases.
//
// Revoke(h, hold): the operator's word beats an in-flight render. For each slot of h's window
// whose state is live and whose hash is h: a lease is CASed to (now+hold, released, same
// version), ending it (its holder's Release, Extend and Check all fail from then on: the
// result it carries is fenced); a grace ending before now+hold is extended to it. If no slot
// held h, a free slot (or the grace that ends soonest) becomes a grace of h until now+hold,
// placed like an acquire (state, then hash, then a scan of the window): the hold. So for the
// hold no Acquire of h succeeds, in particular none from a stale ready-set entry published
// before the revoke. A concurrent Acquire of h either sees the hold and refuses, or published
// first and is seen by Revoke's scan after the hold, and ended; an acquirer re-reads its own
// state before it returns and refuses a grant that was ended under it.
//
// The hold is a grace: in a window without a free slot it may be taken over like any grace
// (counted in gracesEvicted), and in a window of live leases there is no room for it at all
// (Revoke reports held false). Then a stale ready-set entry may be granted; what it renders
// is the row as it stands, and worker 0's fencing still keys on the row. Revoke reads a slot's
// state before its hash, and an acquirer stores its state before its hash: a slot last used by
// h and being taken by another key at that very instant can be mistaken for h's. The cost is
// liveness only: that other key's grant is refused, or its render's result fenced, and it is
// unclaimable until the hold ends; no key ever gets two leases, and no result is applied twice.
// Revoke's report stays true: it reads each slot's hash back after setting its state and
// counts the slot as h's hold only if it still holds h (else it places a hold of its own, a
// slot it took by CAS and reads back after storing the hash). A holder of a hold is
// HoldHolder. What no reader can see is a writer stopped between its state store and its
// hash store (two adjacent instructions) for the whole of a revoke: its hash lands after the
// read-back, and a hold reported for h is that other key's. It takes a thread preempted at
// that one instruction for the length of a window scan; its cost is the liveness above.
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

// slot returns slot i. i < capacity always holds: every index comes from next, or from
// slotOf, which checks a lease's slot before it is used.
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
		free, freeState, evicting, found, held := l.pick(keyHash, home, relNow)
		switch {
		case held:
			atomic.AddUint64(l.refusedHeld, 1)
			return Lease{}, Held
		case !found:
			atomic.AddUint64(l.refusedFull, 1)
			return Lease{}, Full
		}
		mine := packState(l.rel(nowMs+ttlMs), false, freeState+1)
		if !l.take(free, freeState, mine, evicting, keyHash, holder, nowMs) {
			continue
		}
		sl := l.slot(free)
		if l.liveElsewhere(keyHash, home, free, relNow) {
			atomic.CompareAndSwapUint64(&sl.state, mine, packState(0, false, mine))
			atomic.AddUint64(l.refusedContended, 1)
			return Lease{}, Contended
		}
		if atomic.LoadUint64(&sl.state) != mine { // revoked under us: the slot is now a hold
			atomic.AddUint64(l.refusedHeld, 1)
			return Lease{}, Held
		}
		return Lease{Slot: uint32(free), State: mine, KeyHash: keyHash}, Acquired
	}
	atomic.AddUint64(l.refusedContended, 1)
	return Lease{}, Contended
}

// pick scans keyHash's window at relNow for the slot a new lease or hold takes: the key's own
// lapsed slot, else the first lapsed one, else (evicting) the release grace that ends soonest.
// found is false when every slot is a live lease. held reports that a live slot (lease or
// grace) holds keyHash; Acquire refuses then.
func (l *Leases) pick(keyHash, home, relNow uint64) (slot, state uint64, evicting, found, held bool) {
	grace, graceState, graceFound := uint64(0), uint64(0), false
	for i, j := home, uint64(0); j < l.window; i, j = l.next(i), j+1 {
		sl := l.slot(i)
		h := atomic.LoadUint64(&sl.hash)
		st := atomic.LoadUint64(&sl.state)
		if exp := st >> expiryShift; exp > relNow {
			if h == keyHash {
				held = true
			}
			if st&releasedBit != 0 && (!graceFound || exp < graceState>>expiryShift) {
				grace, graceState, graceFound = i, st, true
			}
			continue
		}
		// Prefer the key's own lapsed slot, so one key does not spread over its window.
		if !found || h == keyHash {
			slot, state, found = i, st, true
		}
	}
	if !found && graceFound {
		return grace, graceState, true, true, held
	}
	return slot, state, false, found, held
}

// take CASes slot i's state from the one pick saw to mine, then publishes keyHash, holder and
// acquiredAt in it (state first: see the Leases doc). It reports false if the CAS lost: another
// key took the slot since pick looked.
func (l *Leases) take(i, seen, mine uint64, evicting bool, keyHash, holder uint64, nowMs int64) bool {
	sl := l.slot(i)
	if !atomic.CompareAndSwapUint64(&sl.state, seen, mine) {
		return false
	}
	if evicting {
		atomic.AddUint64(l.gracesEvicted, 1)
	}
	atomic.StoreUint64(&sl.hash, keyHash)
	atomic.StoreUint64(&sl.holder, holder)
	atomic.StoreUint64(&sl.acquiredAt, uint64(nowMs))
	return true
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

// slotOf returns the slot lease names, or false if the lease cannot be one of this table's:
// its slot is out of range, or the slot holds another key. It is the only way a slot number
// from a caller reaches slot: a lease from outside the process is never dereferenced unchecked.
func (l *Leases) slotOf(lease Lease) (*leaseSlot, bool) {
	if uint64(lease.Slot) >= l.capacity {
		return nil, false
	}
	sl := l.slot(uint64(lease.Slot))
	return sl, atomic.LoadUint64(&sl.hash) == lease.KeyHash
}

// sameGrant reports whether st is the state of the grant lease was taken from: the same
// version, not released (Extend moves only the expiry).
func sameGrant(st uint64, lease Lease) bool {
	return st&releasedBit == 0 && lease.State&releasedBit == 0 && st&versionMask == lease.State&versionMask
}

// Valid reports whether lease can be one this table granted for the key whose hash is
// keyHash, from its words alone: nil, or ErrLeaseSlot (its slot is past the table) or
// ErrLeaseKey (its hash is not keyHash). It reads no slot. A lease from outside the process
// that is not Valid is a forgery or a bug: refuse the request; whether a valid one is still
// held is Check's to say.
func (l *Leases) Valid(lease Lease, keyHash uint64) error {
	if uint64(lease.Slot) >= l.capacity {
		return fmt.Errorf("%w: slot %d, table of %d", ErrLeaseSlot, lease.Slot, l.capacity)
	}
	if lease.KeyHash != keyHash {
		return ErrLeaseKey
	}
	return nil
}

// Check reports whether lease is, at nowMs, the live grant of the key whose hash is keyHash:
// nil iff it is Valid and the slot still holds exactly this grant (the same state, unexpired
// and not released, and the same key). Otherwise it returns ErrLeaseSlot, ErrLeaseKey or
// ErrLeaseNotHeld. It writes nothing. Worker 0 calls it under the key's lock before it applies
// a result, so a result is applied only by the grant's holder, and at most once: the apply
// releases the grant before the lock is let go.
func (l *Leases) Check(lease Lease, keyHash uint64, nowMs int64) error {
	if err := l.Valid(lease, keyHash); err != nil {
		return err
	}
	sl, ok := l.slotOf(lease)
	st := atomic.LoadUint64(&sl.state)
	switch {
	case !ok || st != lease.State:
		return fmt.Errorf("%w: slot %d was released, revoked or re-granted", ErrLeaseNotHeld, lease.Slot)
	case st&releasedBit != 0 || st>>expiryShift <= l.rel(nowMs):
		return fmt.Errorf("%w: slot %d lapsed or was released", ErrLeaseNotHeld, lease.Slot)
	}
	return nil
}

// Release ends lease at nowMs. The key stays unclaimable for graceMs more (the commit-visibility
// grace: until the result's reschedule is visible to the next sweep); 0 frees it at once.
// Release is for the lease's holder, who has its exact words. A lease that arrives from outside
// the process must pass Check first: Release matches the grant by slot, key hash and version
// only (not by expiry, which an Extend moves), so a forged lease that guesses those words
// releases the real grant. Worker 0 checks, then releases, under the key's lock.
// It releases the grant, whatever expiry an Extend of it moved it to. It reports false if the
// lease is not this table's (slot out of range, or the slot holds another key), or had already
// lapsed, been released or been revoked: a release never touches a lease it does not hold. A
// lapsed lease whose slot nobody took is marked released as it lies (still lapsed), so that
// Check never again accepts it, whatever the clock does.
func (l *Leases) Release(lease Lease, nowMs, graceMs int64) bool {
	sl, ok := l.slotOf(lease)
	if !ok {
		return false
	}
	relNow := l.rel(nowMs)
	for {
		st := atomic.LoadUint64(&sl.state)
		if !sameGrant(st, lease) {
			return false
		}
		if st>>expiryShift <= relNow {
			atomic.CompareAndSwapUint64(&sl.state, st, st|releasedBit)
			return false
		}
		if atomic.CompareAndSwapUint64(&sl.state, st, packState(l.rel(nowMs+graceMs), true, st)) {
			return true
		}
	}
}

// ExpiresAtMs is when lease lapses, as its state says (an Extend moves it). It reads no slot:
// whether the lease is still held is Check's to say.
func (l *Leases) ExpiresAtMs(lease Lease) int64 { return l.epochMs + int64(lease.expiresRel()) }

// Extend moves a held lease's expiry to nowMs+ttlMs, for a render that outlives its TTL. It
// reports false if the lease is not this table's, or had lapsed, been released or been
// revoked; the caller no longer holds the row.
func (l *Leases) Extend(lease *Lease, nowMs, ttlMs int64) bool {
	sl, ok := l.slotOf(*lease)
	if !ok || lease.expiresRel() <= l.rel(nowMs) {
		return false
	}
	next := packState(l.rel(nowMs+ttlMs), false, lease.State)
	if !atomic.CompareAndSwapUint64(&sl.state, lease.State, next) {
		return false
	}
	lease.State = next
	return true
}

// HoldHolder is the holder recorded in a hold (a grace Revoke places for a key that had no
// lease): no worker (pid<<16 | index, pid < 2^22) and no remote renderer (bit 63) has it.
const HoldHolder uint64 = 1 << 62

// Revoke ends whatever live lease keyHash has at nowMs and keeps the key unclaimable until
// nowMs+holdMs (the hold; holdMs ≤ 0 only ends the lease). ended reports that a live lease was
// ended: its holder's result will be fenced. held reports that, when Revoke returned, a slot of
// the key's window held keyHash as a grace until the end of the hold, verified after it was
// written: a slot counts only if it still holds keyHash's hash once its state was set (a slot
// another key was taking at that instant is not counted), and a hold Revoke placed only if its
// state is still the one written once its hash is stored (an evicted hold is placed again).
// held is false when the window had no room for the hold (every slot a live lease of another
// key). Worker 0 calls it under the key's lock, for a delete, rush or wait: whatever render
// was granted before is not applied over them. The protocol, and the hold's limits, are in the
// Leases doc.
func (l *Leases) Revoke(keyHash uint64, nowMs, holdMs int64) (ended, held bool) {
	relNow, until := l.rel(nowMs), l.rel(nowMs+holdMs)
	home := keyHash % l.capacity
	ended, held = l.revokeWindow(keyHash, home, relNow, until)
	if until <= relNow {
		return ended, true
	}
	if held {
		return ended, true
	}
	if !l.placeHold(keyHash, home, relNow, until, nowMs) {
		return ended, false
	}
	// An acquirer that published before the hold did not see it: end its lease too.
	e, _ := l.revokeWindow(keyHash, home, relNow, until)
	return ended || e, true
}

// revokeWindow ends every live lease of keyHash in its window and extends its graces to
// until. held reports that a slot still holding keyHash's hash after its state was set (or
// found) is live until at least until.
func (l *Leases) revokeWindow(keyHash, home, relNow, until uint64) (ended, held bool) {
	for i, j := home, uint64(0); j < l.window; i, j = l.next(i), j+1 {
		sl := l.slot(i)
		for {
			st := atomic.LoadUint64(&sl.state)
			exp := st >> expiryShift
			if exp <= relNow || atomic.LoadUint64(&sl.hash) != keyHash {
				break
			}
			released := st&releasedBit != 0
			if released && exp >= until {
				held = held || atomic.LoadUint64(&sl.hash) == keyHash
				break
			}
			if atomic.CompareAndSwapUint64(&sl.state, st, packState(until, true, st)) {
				ended = ended || !released
				// Re-read: a slot another key was taking (its state stored, its hash not
				// yet) looked like keyHash's. Its holder is refused; it is no hold of ours.
				held = held || (until > relNow && atomic.LoadUint64(&sl.hash) == keyHash)
				break
			}
		}
	}
	return ended, held
}

// placeHold makes the slot an Acquire of keyHash would take a grace of keyHash until until,
// held by HoldHolder. A grace may be evicted between its state and its hash, so the slot is
// read back once its hash is stored: if its state is no longer the one written, the hold is
// placed again. It reports false if the window is all live leases, or the hold was taken four
// times over.
func (l *Leases) placeHold(keyHash, home, relNow, until uint64, nowMs int64) bool {
	for range 4 {
		free, freeState, evicting, found, _ := l.pick(keyHash, home, relNow)
		if !found {
			return false
		}
		mine := packState(until, true, freeState+1)
		if !l.take(free, freeState, mine, evicting, keyHash, HoldHolder, nowMs) {
			continue
		}
		sl := l.slot(free)
		if atomic.LoadUint64(&sl.state) == mine && atomic.LoadUint64(&sl.hash) == keyHash {
			return true
		}
	}
	return false
}

// HostSlotMark is set in the holder recorded with a host token (package hosts: the token of
// holder h is held by h | HostSlotMark): counts of a holder's leases (CountHolder, CountHolders, Stats.Live)
// count rows, and a render holds two leases, its row's and its host's. No holder id has the
// bit: a local one is pid<<16 | index, a remote one sets bit 63 and 60 bits of its name, and
// HoldHolder is bit 62.
const HostSlotMark uint64 = 1 << 61

// ReleaseHeld gives back at once (no grace) one live lease of keyHash that holder holds, for a
// holder that does not keep its lease's words, and reports whether it released one: worker 0
// gives back a remote renderer's host token by holder (package hosts).
func (l *Leases) ReleaseHeld(keyHash, holder uint64, nowMs int64) bool {
	relNow, released := l.rel(nowMs), false
	l.heldBy(keyHash, holder, relNow, func(sl *leaseSlot, st uint64) bool {
		released = atomic.CompareAndSwapUint64(&sl.state, st, packState(relNow, true, st))
		return released
	})
	return released
}

// ExtendHeld moves every live lease of keyHash that holder holds to expire no earlier than
// untilMs; a lease that expires later already is left as it is.
func (l *Leases) ExtendHeld(keyHash, holder uint64, nowMs, untilMs int64) {
	until := l.rel(untilMs)
	l.heldBy(keyHash, holder, l.rel(nowMs), func(sl *leaseSlot, st uint64) bool {
		if st>>expiryShift < until {
			atomic.CompareAndSwapUint64(&sl.state, st, packState(until, false, st))
		}
		return false
	})
}

// heldBy calls fn with each live, unreleased slot of keyHash's window that holder holds, and
// the state it read, until fn returns true.
func (l *Leases) heldBy(keyHash, holder, relNow uint64, fn func(sl *leaseSlot, st uint64) (stop bool)) {
	for s, j := keyHash%l.capacity, uint64(0); j < l.window; s, j = l.next(s), j+1 {
		sl := l.slot(s)
		st := atomic.LoadUint64(&sl.state)
		if atomic.LoadUint64(&sl.hash) != keyHash || atomic.LoadUint64(&sl.holder) != holder ||
			st&releasedBit != 0 || st>>expiryShift <= relNow {
			continue
		}
		if fn(sl, st) {
			return
		}
	}
}

// ReleaseHolders gives back at once (no grace) every live lease whose holder match accepts,
// and returns how many. It scans the whole table, like CountHolders.
func (l *Leases) ReleaseHolders(nowMs int64, match func(holder uint64) bool) int {
	relNow, n := l.rel(nowMs), 0
	for i := range l.capacity {
		sl := l.slot(i)
		st := atomic.LoadUint64(&sl.state)
		if st&releasedBit != 0 || st>>expiryShift <= relNow || !match(atomic.LoadUint64(&sl.holder)) {
			continue
		}
		if atomic.CompareAndSwapUint64(&sl.state, st, packState(relNow, true, st)) {
			n++
		}
	}
	return n
}

// CountHolder counts holder's live leases at nowMs (graces are not counted). It scans the whole
// table: it is for capping a remote holder's leases, not for a hot path.
func (l *Leases) CountHolder(holder uint64, nowMs int64) int {
	return l.CountHolders(nowMs, func(h uint64) bool { return h == holder })
}

// CountHolders counts the live leases of rows at nowMs whose holder match accepts (graces
// and host slots are not counted). It scans the whole table, like CountHolder.
func (l *Leases) CountHolders(nowMs int64, match func(holder uint64) bool) int {
	relNow, n := l.rel(nowMs), 0
	for i := range l.capacity {
		sl := l.slot(i)
		st := atomic.LoadUint64(&sl.state)
		if st>>expiryShift > relNow && st&releasedBit == 0 {
			if h := atomic.LoadUint64(&sl.holder); h&HostSlotMark == 0 && match(h) {
				n++
			}
		}
	}
	return n
}

// LiveKeys returns the key hashes of the live leases of rows at nowMs (graces and host slots
// are not counted) that match accepts. It scans the whole table, like CountHolder: a node that gives a shard up
// finds its grants of the shard with it, to Revoke them.
func (l *Leases) LiveKeys(nowMs int64, match func(keyHash uint64) bool) []uint64 {
	relNow := l.rel(nowMs)
	var keys []uint64
	for i := range l.capacity {
		sl := l.slot(i)
		st := atomic.LoadUint64(&sl.state)
		if st>>expiryShift > relNow && st&releasedBit == 0 && atomic.LoadUint64(&sl.holder)&HostSlotMark == 0 {
			if h := atomic.LoadUint64(&sl.hash); h != 0 && match(h) {
				keys = append(keys, h)
			}
		}
	}
	return keys
}

// Capacity is the number of slots of the table (queue.max_leases).
func (l *Leases) Capacity() int { return int(l.capacity) }

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
	Live             int // unexpired leases of rows at the time of the scan
	HostSlots        int // unexpired host tokens (holder with HostSlotMark): renders in flight, counted by host
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
			switch {
			case s&releasedBit != 0:
				st.Graces++
			case atomic.LoadUint64(&l.slot(i).holder)&HostSlotMark != 0:
				st.HostSlots++
			default:
				st.Live++
			}
		}
	}
	return st
}
