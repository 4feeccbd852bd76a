// Package hosttable is the segment's host table (package shm gives it: Segment.Hosts): its
// memory layout and its atomic access. It stores the politeness state
// of the hosts that are not at their defaults, a host paused by a Retry-After or whose limit
// of renders in flight was lowered by its errors, and the farm words; package hosts gives them
// their meaning and makes every decision. Worker 0 is the table's one writer; every process
// reads it at each take. The byte-by-byte layout is docs/shm-format.md's "Host table".
//
// Control line (ControlSize bytes):
//
//	0   stores     uint64  slots written since the segment was created
//	8   evictions  uint64  hosts dropped from a full window to make room (their state is lost)
//	16  farm       five words and their sequence word (farm.go)
//
// Then capacity slots of SlotSize bytes, each read under its own sequence lock:
//
//	0   seq         uint64  odd while the writer rewrites the slot
//	8   hash        uint64  Hash of the host; 0 = free
//	16  pausedUntil int64   ms: no render of the host is granted before it; 0 = not paused
//	24  limit       uint64  renders in flight allowed now; 0 = the configured maximum
//	32  streaks     uint64  errStreak (32) | okStreak (32) << 32
//	40  since       int64   ms, when the current pause or lowered limit began
//	48  info        uint64  cause (8) | status (16) << 8 | host name length (16) << 24
//	56  (reserved)
//	64  host        [256]byte, the host's name, name length of them meaningful
//
// Then the farm's shares, FarmShares entries of 16 bytes, read and written with the farm words
// under their sequence word (farm.go):
//
//	0   hash        uint64  Hash of the host; 0 = free, and every entry after it too
//	8   share       uint64  package hosts' word: the node's shares of the host (hosts.Membership)
//
// Invariants:
//   - A host lives in one of 16 slots from its home slot, hash % capacity. A reader loads seq,
//     and retries while it is odd; copies the slot; then loads seq again, and keeps the copy
//     only if seq did not move. The writer makes seq odd, writes, then makes it even again; a
//     writer killed in between leaves an odd seq, which readers treat as "not in the table"
//     (the host's defaults) until the next writer (a new worker 0) rewrites or frees the slot.
//     Every word is moved with an atomic load or store, so a copy racing a write is never a
//     data race, only a discarded copy. The farm words are read and written the same way.
//   - A full window evicts the slot whose pause ends soonest (a host only throttled first); a
//     paused host is evicted only for a host paused until later (Table.Store).
//
// The renders of a host in flight are not counted here: they are host tokens in the lease
// table (package hosts), which lapse with their lease when a holder dies.
package hosttable
