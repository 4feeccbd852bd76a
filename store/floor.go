package store

import "sync/atomic"

// FloorCell is the claim floor's watermark in ms. shm.Floor implements it.
//
// The cell is shared by every process of a node, but only worker 0 changes it: the funnel
// lowers it before a batch commits, a sweep pass advances it (store/badgerstore's protocol.go).
// An engine depends on exactly these three operations and on their atomicity, nothing else.
type FloorCell interface {
	// Load returns the current floor.
	Load() int64
	// Lower is a CAS-min: it lowers the floor to ms if ms is below it, and reports whether it
	// changed it.
	Lower(ms int64) bool
	// Advance is a CAS observed→to: it succeeds only if the cell still holds observed and
	// to > observed.
	Advance(observed, to int64) bool
}

// MemFloor is an in-process FloorCell: an atomic int64. It is the default when an engine's
// Options.Floor is nil, and what tests and single-process tools use instead of the shared-memory cell. The zero
// value is a floor at 0.
type MemFloor struct {
	v atomic.Int64
}

var _ FloorCell = (*MemFloor)(nil)

// NewMemFloor returns a MemFloor holding ms.
func NewMemFloor(ms int64) *MemFloor {
	f := &MemFloor{}
	f.v.Store(ms)
	return f
}

// Load implements FloorCell.
func (f *MemFloor) Load() int64 { return f.v.Load() }

// Lower implements FloorCell.
func (f *MemFloor) Lower(ms int64) bool {
	for {
		cur := f.v.Load()
		if ms >= cur {
			return false
		}
		if f.v.CompareAndSwap(cur, ms) {
			return true
		}
	}
}

// Advance implements FloorCell.
func (f *MemFloor) Advance(observed, to int64) bool {
	return to > observed && f.v.CompareAndSwap(observed, to)
}
