package shm

import "math"

// Entry is one row of a published set.
//
// In the segment an entry is EntrySize bytes (40 + KeyCapacity rounded up to 8):
//
//	0   score      float64   relative lateness, the order the set was published in
//	8   dueAt      int64     ms; the row's due time as the sweep read it
//	16  cadence    int64     ms; the cadence the score was computed with
//	24  keyHash    uint64    KeyHash(key), so takers never hash
//	32  keyLen     uint16
//	34  flags      uint8     bit 0: submitted; bit 1: checkable
//	35  lane       uint8     policy's lane number, opaque here
//	36  fence      uint32    the node's fence version when the set was published (Fence)
//	40  key        [KeyCapacity]byte, keyLen of them meaningful
type Entry struct {
	Score     float64
	DueAtMs   int64
	CadenceMs int64
	Submitted bool
	// Checkable is the row's hint that its origin sent validators (store.Projection.Checkable):
	// the render worker that takes it asks worker 0 for a conditional check first.
	Checkable bool
	Lane      uint8
	Key       []byte
	// Fence is the node's fence version (Fence.Load) read before the pass that produced the
	// entry: a take re-checks it against the cell, so an entry of a shard the node has given
	// up since is never granted.
	Fence uint32

	// Set by Take; ignored by Publish, which computes KeyHash itself.
	KeyHash uint64
	Gen     uint64 // the generation the entry was taken from
	Index   uint32 // its position in that generation
}

const (
	entryFlagSubmitted = 1 << 0
	entryFlagCheckable = 1 << 1
)

// entryHeader is the first 40 bytes of an entry as five words.
type entryHeader [5]uint64

func packHeader(e *Entry) entryHeader {
	var flags uint64
	if e.Submitted {
		flags |= entryFlagSubmitted
	}
	if e.Checkable {
		flags |= entryFlagCheckable
	}
	return entryHeader{
		math.Float64bits(e.Score),
		uint64(e.DueAtMs),
		uint64(e.CadenceMs),
		KeyHash(e.Key),
		uint64(len(e.Key)) | flags<<16 | uint64(e.Lane)<<24 | uint64(e.Fence)<<32,
	}
}

// unpackHeader fills e from h and returns the key length, bounded by keyCap: a torn header may
// claim any length, and the copy that follows must stay inside the entry. Validation after the
// copy discards such an entry.
func unpackHeader(h *entryHeader, e *Entry, keyCap uint32) int {
	e.Score = math.Float64frombits(h[0])
	e.DueAtMs = int64(h[1])
	e.CadenceMs = int64(h[2])
	e.KeyHash = h[3]
	e.Submitted = (h[4]>>16)&entryFlagSubmitted != 0
	e.Checkable = (h[4]>>16)&entryFlagCheckable != 0
	e.Lane = uint8(h[4] >> 24)
	e.Fence = uint32(h[4] >> 32)
	return int(min(uint32(h[4]&0xffff), keyCap))
}
