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
