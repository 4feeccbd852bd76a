package shm

import "sync/atomic"

// Fence lets a node stop granting the rows of shards it no longer owns, from every process at
// once. It lives in the floor cell's line (words 40 and 48, docs/shm-format.md) and holds two
// words, both written only by worker 0:
//
//   - the fence version, which worker 0 bumps before it gives up any shard (a handover, or a
//     lease found lost). Every published entry carries the version read before the pass that
//     produced it (Entry.Fence); an entry whose version is no longer the cell's is not granted.
//   - grantUntil, in ms: no take is granted at or after it. Worker 0 keeps it inside its shard
//     leases (the local time before a renewal, plus less than the lease's TTL), so a node that
//     stops renewing (paused, partitioned, slow) stops granting before any other node can
//     acquire its shards. 0 means no limit: a node that shares its store with no one.
//
// A taker checks the fence after its lease is granted (Allows), at a time no earlier than the
// grant: if the check passes, the grant happened before any later bump or expiry, so before
// another node could own the shard.
//
// Only the low 32 bits of the version are carried by an entry; a node would have to give up
// shards 2³² times within the life of one published set for a stale entry to match again.
type Fence struct {
	version, grantUntil *uint64
}

func (f *Fence) init(s *Segment) {
	base := s.layout.floor.off
	f.version = s.word(base + 40)
	f.grantUntil = s.word(base + 48)
}

// Load returns the fence version and grantUntil (ms, 0 = no limit).
func (f *Fence) Load() (version uint64, grantUntilMs int64) {
	return atomic.LoadUint64(f.version), int64(atomic.LoadUint64(f.grantUntil))
}

// Version is the fence version, which a pass stamps on the entries it publishes.
func (f *Fence) Version() uint32 { return uint32(atomic.LoadUint64(f.version)) }

// Allows reports whether an entry stamped with entryFence may be granted at nowMs: the
// version has not moved since, and nowMs is before grantUntil (or there is no limit).
func (f *Fence) Allows(entryFence uint32, nowMs int64) bool {
	if uint32(atomic.LoadUint64(f.version)) != entryFence {
		return false
	}
	until := int64(atomic.LoadUint64(f.grantUntil))
	return until == 0 || nowMs < until
}

// Bump moves the fence version on, so that no entry published before is granted any more,
// and returns the new version.
func (f *Fence) Bump() uint64 { return atomic.AddUint64(f.version, 1) }

// SetGrantUntil sets grantUntil (ms; 0 = no limit).
func (f *Fence) SetGrantUntil(ms int64) { atomic.StoreUint64(f.grantUntil, uint64(ms)) }
