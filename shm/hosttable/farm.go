package hosttable

import (
	"sync/atomic"
	"unsafe"
)

// FarmWords is the number of farm words: the node's membership in its cluster, as the division
// of each host's limit among the live nodes reads it (package hosts owns that division and the
// words' meaning, docs/shm-format.md; this is only their storage). They live in the host
// table's control line (words 16 to 48) under a sequence word of their own (56), are written
// by worker 0 alone at each cluster tick and read by every process at each take: a reader
// copies the words between two equal, even readings of the sequence word. A node that shares
// its store with no one never writes them, and all zero means "no farm".
const FarmWords = 5

func (t *Table) farmWord(i int) *uint64 {
	return (*uint64)(unsafe.Add(t.control, 16+8*i))
}

// LoadFarm copies the farm words. Any process may call it; it never blocks: a read racing
// worker 0's write returns the last complete one it can copy, or all zero (no farm) after
// seqReadAttempts, which only a writer killed mid-write leaves.
func (t *Table) LoadFarm() (w [FarmWords]uint64) {
	seq := t.farmWord(FarmWords)
	for range seqReadAttempts {
		s := atomic.LoadUint64(seq)
		if s&1 != 0 {
			continue
		}
		for i := range w {
			w[i] = atomic.LoadUint64(t.farmWord(i))
		}
		if atomic.LoadUint64(seq) == s {
			return w
		}
	}
	return [FarmWords]uint64{}
}

// StoreFarm writes the farm words. Only worker 0 may call it.
func (t *Table) StoreFarm(w [FarmWords]uint64) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	seq := t.farmWord(FarmWords)
	s := atomic.AddUint64(seq, 1)
	if s&1 == 0 { // a writer was killed mid-write: make it odd now
		s = atomic.AddUint64(seq, 1)
	}
	for i := range w {
		atomic.StoreUint64(t.farmWord(i), w[i])
	}
	atomic.StoreUint64(seq, s+1)
}

// FarmShares is the number of entries of the farm's shares, after the slots: one host's
// shares each, read under the farm words' sequence word, so that a reader sees the entries
// and the words they belong to as worker 0 wrote them together (package hosts owns their
// meaning: a division of a host's limit that follows the nodes' demand). FarmSharesSize is
// their size: 16 bytes each, the host's hash (0: a free entry) and a word of package hosts'.
const (
	FarmShares     = 32
	FarmSharesSize = 16 * FarmShares
)

func (t *Table) shareWord(i, w int) *uint64 {
	return (*uint64)(unsafe.Add(t.shares, 16*i+8*w))
}

// LoadFarmShare copies the farm words and the share word of the host whose hash is hash
// (found false: no entry holds it), all from one writing. Any process may call it; it never
// blocks, and like LoadFarm falls back to all zero.
func (t *Table) LoadFarmShare(hash uint64) (w [FarmWords]uint64, share uint64, found bool) {
	seq := t.farmWord(FarmWords)
	for range seqReadAttempts {
		s := atomic.LoadUint64(seq)
		if s&1 != 0 {
			continue
		}
		for i := range w {
			w[i] = atomic.LoadUint64(t.farmWord(i))
		}
		share, found = 0, false
		for i := range FarmShares {
			h := atomic.LoadUint64(t.shareWord(i, 0))
			if h == 0 {
				break
			}
			if h == hash {
				share, found = atomic.LoadUint64(t.shareWord(i, 1)), true
				break
			}
		}
		if atomic.LoadUint64(seq) == s {
			return w, share, found
		}
	}
	return [FarmWords]uint64{}, 0, false
}

// StoreFarmShares writes the farm words and the farm's shares (hashes[i]'s share word
// shares[i]; at most FarmShares, the rest freed) as one writing. Only worker 0 may call it.
func (t *Table) StoreFarmShares(w [FarmWords]uint64, hashes, shares []uint64) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	seq := t.farmWord(FarmWords)
	s := atomic.AddUint64(seq, 1)
	if s&1 == 0 { // a writer was killed mid-write: make it odd now
		s = atomic.AddUint64(seq, 1)
	}
	for i := range w {
		atomic.StoreUint64(t.farmWord(i), w[i])
	}
	for i := range FarmShares {
		h, v := uint64(0), uint64(0)
		if i < len(hashes) && i < len(shares) {
			h, v = hashes[i], shares[i]
		}
		atomic.StoreUint64(t.shareWord(i, 0), h)
		atomic.StoreUint64(t.shareWord(i, 1), v)
	}
	atomic.StoreUint64(seq, s+1)
}
