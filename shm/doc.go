// Package shm is freshq's shared-memory segment: one file, mapped by the supervisor and every
// worker, that holds the double-slotted ready buffer, the lease table, the claim-floor cell,
// one block of heartbeats and counters per worker, and the host table of politeness (its layout
// and atomic access in shm/hosttable). It imports nothing else of freshq.
//
// # What a caller may rely on
//
// The segment is self-describing (R5). Attach validates magic, layout version, a crc32c of the
// header, and every offset and size the header declares against the file's real length, and
// returns an error wrapping ErrBadMagic, ErrVersion, ErrTruncated or ErrCorrupt. It never panics
// on a file's contents and never hands out a view that could reach past the mapping.
//
// The ready buffer has one writer (worker 0's sweep) and lock-free readers in any number of
// processes:
//
//   - R1: each entry of a generation is handed out at most once, across all processes.
//   - R2: a Take never returns a torn entry, nor one of a generation other than the one it
//     validated; a reader stalled across two publishes detects the rewrite and discards its copy.
//   - R3: a slot's cursor stays within count + (takes in flight), never wraps, and is never
//     rewound by a stale take: the exhausted-take clamp is a CAS on a word that carries the
//     generation.
//   - R4: readers never block the writer, and a reader killed at any point blocks nobody.
//
// A take on an empty, cold or exhausted set writes nothing to shared memory.
//
// The lease table grants at most one unexpired lease per key across all processes. A lease
// held by a killed process lapses at its expiry. A full window refuses and counts, never
// overwrites. A release is a CAS from the grant's own state (its slot and version), so it
// never shortens somebody else's newer lease; a released key stays unclaimable for the
// caller's grace.
//
// Politeness is package hosts'; the segment only stores its state and decides nothing. A host's
// renders in flight are host tokens, leases of the lease table (holder marked HostSlotMark)
// that package hosts takes and gives back, and a killed holder's token lapses like its lease.
// The host table (Hosts, package hosttable) has one writer, worker 0; readers copy a slot
// under its sequence lock and never keep a torn copy.
//
// A Lease is a plain value and may come from outside the process (a result batch, a remote
// renderer): every method taking one checks its slot against the table and its key hash
// against the slot before it touches anything, whatever the value. Check tells a lease that
// cannot be this table's (ErrLeaseSlot, ErrLeaseKey) from one that was but is no longer held
// (ErrLeaseNotHeld: lapsed, released, revoked, re-granted, or never granted). Once a grant is
// released, revoked or re-granted, no copy of it ever checks again: that is what lets worker 0
// apply a result at most once per grant. Revoke ends a key's live lease and holds the key for a
// while, so that neither the in-flight render's result nor a stale ready-set entry undoes an
// operator's delete, rush or wait; the hold is a grace, with a grace's limits (lease.go).
//
// The floor cell lowers only by CAS-min and advances only by CAS from the value the advancer
// observed.
//
// On a cluster the segment also holds the node's fence (Fence, fence.go): a version worker 0
// bumps before it gives up any shard, and a time (grantUntil) kept inside its shard leases. An
// entry published under an older version, or a take at or after that time, is not granted, so a
// node that stops renewing stops granting before another node can own its shards.
//
// # Limits
//
// Everything here is "at most once": an entry may be skipped (a reader whose add lands on a
// generation published under it gives that index up) and a lease may lapse. Callers recover by
// construction: a skipped or lapsed row is still due, and the next sweep republishes it.
//
// Times are int64 milliseconds since the Unix epoch, passed in by the caller: nothing here reads
// a clock, except Create, which records the wall clock as the epoch if none is given. Lease
// expiries are stored relative to that epoch in 40 bits, so clocks used with the table must lie
// within about 34 years after it.
//
// The memory model: atomic words are accessed with sync/atomic, which is sequentially
// consistent. Entry bytes are copied plainly on amd64 (TSO) and word by word with atomics
// elsewhere; see entrycopy_amd64.go. The byte-by-byte layout is in docs/shm-format.md.
package shm
