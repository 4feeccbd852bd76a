package hosts

import (
	"encoding/binary"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/shm"
)

// A host's renders in flight are its host tokens, leases of the segment's lease table: render
// slot i of host h is the lease-table key of token(h, i), held by holder | shm.HostSlotMark.
// The table grants one lease per key across all processes, so at most a host's limit of its
// renders hold a token at once; a holder killed mid-render loses its token when the lease
// lapses, or at once when the render worker of its index starts again
// (ReleaseEarlierIncarnations). The derivation of a token's key is part of the segment's
// format (docs/shm-format.md, Host tokens): every process must agree on it.

// MaxTokens bounds a host's limit: AdmitToken tries at most this many tokens.
const MaxTokens = 1024

// token is the lease-table key of a host's i-th render slot. Its hash input is 17 bytes and a
// row's key hash is taken over a cache key ("device|url"), so the two never meet except by a
// 64-bit collision.
func token(hostHash uint64, i int) uint64 {
	var b [17]byte
	binary.LittleEndian.PutUint64(b[0:], hostHash)
	binary.LittleEndian.PutUint64(b[8:], uint64(i))
	b[16] = 'H'
	return shm.KeyHash(b[:])
}

// AdmitToken takes one of a host's render slots for holder: a token among 0..limit-1 that
// nobody holds, leased like a row (shm.Leases.Acquire) for ttlMs. At most one lease per token
// exists across all processes, so at most limit renders of the host hold a token at once; a
// holder killed mid-render loses its token at ttlMs. ok is false when every token below limit
// is held. Give the token back with Release(token, now, 0) when the render ends.
//
// The tokens are tried from seed % limit on, wrapping (callers pass the row's key hash), so
// that with k of a host's limit held a take tries about limit/(limit−k) tokens, not k+1: a
// host with a large limit and many renders in flight stays cheap to admit.
func AdmitToken(l *shm.Leases, hostHash uint64, limit int, seed uint64, nowMs, ttlMs int64, holder uint64) (tok shm.Lease, ok bool) {
	limit = min(limit, MaxTokens)
	if limit <= 0 {
		return shm.Lease{}, false
	}
	first := int(seed % uint64(limit))
	for k := range limit {
		i := first + k
		if i >= limit {
			i -= limit
		}
		if lease, st := l.Acquire(token(hostHash, i), nowMs, ttlMs, holder|shm.HostSlotMark); st == shm.Acquired {
			return lease, true
		}
	}
	return shm.Lease{}, false
}

// InFlight counts the host's tokens 0..upTo-1 held now: its renders in flight.
func InFlight(l *shm.Leases, hostHash uint64, upTo int, nowMs int64) int {
	n := 0
	for i := range min(upTo, MaxTokens) {
		if info, held := l.Lookup(token(hostHash, i), nowMs); held && !info.Released {
			n++
		}
	}
	return n
}

// ReleaseTokenOf gives back one of the host's tokens 0..upTo-1 that holder holds (no grace),
// for a holder that does not keep its token's words: worker 0 releases a remote renderer's
// token when its result or release arrives. Tokens of one host are interchangeable, so any of
// the holder's will do. It reports whether it released one.
func ReleaseTokenOf(l *shm.Leases, hostHash uint64, upTo int, holder uint64, nowMs int64) bool {
	for i := range min(upTo, MaxTokens) {
		if l.ReleaseHeld(token(hostHash, i), holder|shm.HostSlotMark, nowMs) {
			return true
		}
	}
	return false
}

// ExtendTokensOf moves every live token of the host (0..upTo-1) that holder holds to expire no
// earlier than untilMs: a remote renderer that extends a row's lease keeps its host slot as
// long.
func ExtendTokensOf(l *shm.Leases, hostHash uint64, upTo int, holder uint64, nowMs, untilMs int64) {
	for i := range min(upTo, MaxTokens) {
		l.ExtendHeld(token(hostHash, i), holder|shm.HostSlotMark, nowMs, untilMs)
	}
}

// ReleaseTokens gives back, at once, every live host token whose holder (without
// shm.HostSlotMark) match accepts, and returns how many. It scans the whole lease table once;
// leases of rows are left alone.
func ReleaseTokens(l *shm.Leases, nowMs int64, match func(holder uint64) bool) int {
	return l.ReleaseHolders(nowMs, func(h uint64) bool {
		return h&shm.HostSlotMark != 0 && match(h&^shm.HostSlotMark)
	})
}

// remoteHolder is the bit a remote renderer's holder id sets (intake.RemoteHolder); a local
// render worker's is pid<<16 | index.
const remoteHolder uint64 = 1 << 63

// ReleaseEarlierIncarnations gives back the host slots of the earlier incarnations of render
// worker index, whose holder id now is me: they were killed mid-render (a worker that stops
// gives its own back), and each of their slots would keep its host below its limit until the
// lease's TTL. Their rows' leases lapse at the TTL as before; a host slot is the node's, a row
// lease only the row's. A render worker calls it as it starts. It returns how many it gave
// back, and logs them.
func ReleaseEarlierIncarnations(seg *shm.Segment, index int, me uint64, nowMs int64, log zerolog.Logger) int {
	n := ReleaseTokens(seg.Leases(), nowMs, func(h uint64) bool {
		local := h&(remoteHolder|shm.HoldHolder) == 0 // not a remote renderer's, not a hold
		return local && h&0xffff == uint64(index) && h != me
	})
	if n > 0 {
		log.Info().Int("host_slots", n).Msg("gave back the host slots of this worker's previous incarnation")
	}
	return n
}
