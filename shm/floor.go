package shm

import "sync/atomic"

// Floor is the claim floor: the watermark below which the floored index scan does not look
// (docs/ARCHITECTURE.md, Invariants: F1; the protocol is store/badgerstore/protocol.go). The sweep in worker 0 owns it; this cell only makes its moves atomic and visible
// to every process. Its safety rule, F1, is the store's and the sweep's to keep: every schedule
// row has dueAt ≥ floor, or a pass in progress has already read it. The cell gives them the two
// moves F1 needs:
//
//   - Lower is a CAS-min: a write filed below the floor pulls the floor down to it, and a
//     concurrent higher value can never win over a lower one.
//   - Advance moves the floor up only from the value the advancer observed when it began its
//     pass. If anything lowered the floor meanwhile, the CAS fails and the pass must not advance.
//
// Line layout (64 bytes):
//
//	0   floor      int64  ms
//	8   pinHash    uint64 KeyHash of the row holding the floor down, 0 = none
//	16  pinSince   int64  ms, since when that row has held it
//	24  nextDue    int64  ms, the first not-yet-due time the last sweep saw; 0 = none
//	32  advancedAt int64  ms, when the floor last moved up
type Floor struct {
	floor, pinHash, pinSince, nextDue, advancedAt *uint64
}

func (f *Floor) init(s *Segment) {
	base := s.layout.floor.off
	f.floor = s.word(base)
	f.pinHash = s.word(base + 8)
	f.pinSince = s.word(base + 16)
	f.nextDue = s.word(base + 24)
	f.advancedAt = s.word(base + 32)
}

// Load returns the floor in ms.
func (f *Floor) Load() int64 { return int64(atomic.LoadUint64(f.floor)) }

// Lower sets the floor to ms if ms is below it, and reports whether it did.
func (f *Floor) Lower(ms int64) bool {
	for {
		cur := atomic.LoadUint64(f.floor)
		if ms >= int64(cur) {
			return false
		}
		if atomic.CompareAndSwapUint64(f.floor, cur, uint64(ms)) {
			return true
		}
	}
}

// Advance moves the floor from observed up to to, and reports whether it did. It fails if the
// floor no longer holds observed (something lowered it, or another pass moved it), or if to is
// not above observed: an advance never lowers, lowering is Lower's job.
func (f *Floor) Advance(observed, to int64) bool {
	if to <= observed {
		return false
	}
	return atomic.CompareAndSwapUint64(f.floor, uint64(observed), uint64(to))
}

// SetPin records which row holds the floor down and since when; hash 0 clears it.
func (f *Floor) SetPin(keyHash uint64, sinceMs int64) {
	atomic.StoreUint64(f.pinHash, keyHash)
	atomic.StoreUint64(f.pinSince, uint64(sinceMs))
}

// Pin returns the row holding the floor down (0 = none) and since when.
func (f *Floor) Pin() (keyHash uint64, sinceMs int64) {
	return atomic.LoadUint64(f.pinHash), int64(atomic.LoadUint64(f.pinSince))
}

// SetNextDue records the first not-yet-due time a sweep saw (0 = none), so a node with a row
// due in 30 s does not report itself idle.
func (f *Floor) SetNextDue(ms int64) { atomic.StoreUint64(f.nextDue, uint64(ms)) }

// NextDue returns what SetNextDue recorded.
func (f *Floor) NextDue() int64 { return int64(atomic.LoadUint64(f.nextDue)) }

// SetAdvancedAt records when the floor last moved up.
func (f *Floor) SetAdvancedAt(ms int64) { atomic.StoreUint64(f.advancedAt, uint64(ms)) }

// AdvancedAt returns what SetAdvancedAt recorded.
func (f *Floor) AdvancedAt() int64 { return int64(atomic.LoadUint64(f.advancedAt)) }
