package shm

import (
	"sync/atomic"
	"unsafe"
)

// The farm words: the node's place in its cluster, as the division of each host's limit among
// the live nodes reads it (package hosts owns that division; this is only its storage). They
// live in the host table's control line (words 16 to 56, docs/shm-format.md), are written by
// worker 0 alone at each cluster tick and read by every process at each take, under a sequence
// word of their own: a reader copies the words between two equal, even readings of it.
//
// A node that shares its store with no one never writes them: Nodes 0 means "no farm", the
// host's whole limit is the node's.

// FarmNone marks PrevNodes (or Nodes) as "no membership this node may count on": its share of
// every host is 0 under it. A node that joins a farm of others starts from it, and so does one
// whose membership changed twice within a grace.
const FarmNone = 0xffff

// HostFarm is the node's membership in its farm.
type HostFarm struct {
	Index, Nodes         uint16 // the node's rank among the live nodes (by id) and their count; Nodes 0: no farm
	PrevIndex, PrevNodes uint16 // the membership before, in force until SinceMs
	SinceMs              int64  // local ms when the current membership took effect
	GraceMs              int64  // how long a share that grew waits before it is used
	RoundMs              int64  // the period at which a limit that does not divide evenly rotates its remainder
	ClockOffsetMs        int64  // the cluster's clock (the database's) minus this node's
}

func (t *Hosts) farmWord(i int) *uint64 {
	return (*uint64)(unsafe.Add(t.control, 16+8*i))
}

// Farm reads the node's farm membership. Any process may call it; it never blocks: a read
// racing worker 0's write returns the last complete one it can copy, or the zero HostFarm
// (no farm) after seqReadAttempts, which only a writer killed mid-write leaves.
func (t *Hosts) Farm() HostFarm {
	seq := t.farmWord(5)
	for range seqReadAttempts {
		s := atomic.LoadUint64(seq)
		if s&1 != 0 {
			continue
		}
		m := atomic.LoadUint64(t.farmWord(0))
		f := HostFarm{
			Index: uint16(m), Nodes: uint16(m >> 16), PrevIndex: uint16(m >> 32), PrevNodes: uint16(m >> 48),
			SinceMs: int64(atomic.LoadUint64(t.farmWord(1))), GraceMs: int64(atomic.LoadUint64(t.farmWord(2))),
			RoundMs: int64(atomic.LoadUint64(t.farmWord(3))), ClockOffsetMs: int64(atomic.LoadUint64(t.farmWord(4))),
		}
		if atomic.LoadUint64(seq) == s {
			return f
		}
	}
	return HostFarm{}
}

// SetFarm writes the node's farm membership. Only worker 0 may call it.
func (t *Hosts) SetFarm(f HostFarm) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	seq := t.farmWord(5)
	s := atomic.AddUint64(seq, 1)
	if s&1 == 0 { // a writer was killed mid-write: make it odd now
		s = atomic.AddUint64(seq, 1)
	}
	atomic.StoreUint64(t.farmWord(0), uint64(f.Index)|uint64(f.Nodes)<<16|uint64(f.PrevIndex)<<32|uint64(f.PrevNodes)<<48)
	atomic.StoreUint64(t.farmWord(1), uint64(f.SinceMs))
	atomic.StoreUint64(t.farmWord(2), uint64(f.GraceMs))
	atomic.StoreUint64(t.farmWord(3), uint64(f.RoundMs))
	atomic.StoreUint64(t.farmWord(4), uint64(f.ClockOffsetMs))
	atomic.StoreUint64(seq, s+1)
}
