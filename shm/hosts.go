package shm

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The host table holds the politeness state of the hosts that are not at their defaults: a
// host paused by a Retry-After, or whose limit of renders in flight was lowered by its errors.
// A host that is not in the table may have its configured maximum in flight (render.hosts).
// Worker 0, which applies every render's result (its own render workers' and remote
// renderers'), is the table's one writer; every process reads it at each take.
//
// Control line (64 bytes):
//
//	0   stores     uint64  slots written since the segment was created
//	8   evictions  uint64  hosts dropped from a full window to make room (their state is lost)
//	16  farm       the node's membership in its cluster (package hosts), five words and a sequence word (farm.go)
//
// Then HostCapacity slots of 320 bytes, each read under its own sequence lock:
//
//	0   seq         uint64  odd while the writer rewrites the slot
//	8   hash        uint64  HostHash of the host; 0 = free
//	16  pausedUntil int64   ms: no render of the host is granted before it; 0 = not paused
//	24  limit       uint64  renders in flight allowed now; 0 = the configured maximum
//	32  streaks     uint64  errStreak (32) | okStreak (32) << 32
//	40  since       int64   ms, when the current pause or lowered limit began
//	48  info        uint64  cause (8) | status (16) << 8 | host name length (16) << 24
//	56  (reserved)
//	64  host        [256]byte, the host's name, name length of them meaningful
//
// A host lives in one of hostWindow slots from its home slot, hash % HostCapacity. A reader
// loads seq, and retries while it is odd; copies the slot; then loads seq again, and keeps the
// copy only if seq did not move. The writer makes seq odd, writes, then makes it even again;
// a writer killed in between leaves an odd seq, which readers treat as "not in the table" (the
// host's defaults) until the next writer (a new worker 0) rewrites or frees the slot. Every
// word is moved with an atomic load or store, so a copy racing a write is never a data race,
// only a discarded copy.
//
// The renders of a host in flight are not counted in this table: they are host tokens in the
// lease table (package hosts), which lapse with their lease when a holder dies.
type Hosts struct {
	stores, evictions *uint64
	control           unsafe.Pointer // the control line: the counters, then the farm words (farm.go)
	slots             unsafe.Pointer
	capacity          uint64

	writeMu sync.Mutex // one writer per process; across processes, only worker 0 writes
}

const (
	hostSlotSize = 320
	hostWords    = 8 // the slot's words before the name
	hostWindow   = 16
	// MaxHostName is the longest host name the table keeps: a DNS name has at most 253
	// bytes, and a port adds six.
	MaxHostName = hostSlotSize - 8*hostWords
	// DefaultHostCapacity is the default number of host slots.
	DefaultHostCapacity = 1024
	maxHostCapacity     = 1 << 20
	// seqReadAttempts bounds how often a reader retries a slot being rewritten.
	seqReadAttempts = 16
)

// HostCause says why a host is not at its defaults (its name for people: hosts.CauseName).
type HostCause uint8

const (
	HostCauseNone       HostCause = iota
	HostCauseRetryAfter           // a 429, or a 503 with Retry-After, paused it
	HostCauseErrors               // consecutive 5xx or timeouts lowered its limit
)

// HostState is one host's politeness state.
type HostState struct {
	Host          string // as in the URL: host[:port]; at most MaxHostName bytes are kept
	Hash          uint64 // HostHash(Host)
	PausedUntilMs int64  // no grant before this; 0 = not paused
	Limit         uint32 // renders in flight allowed now; 0 = the configured maximum
	ErrStreak     uint32 // consecutive 5xx or timeouts
	OKStreak      uint32 // consecutive successes since the limit last changed
	SinceMs       int64  // when the current pause or lowered limit began
	Cause         HostCause
	Status        uint16 // the HTTP status that last changed the state; 0 for a timeout
}

// HostHash is the 64-bit hash of a host name, never 0 (0 marks a free slot): KeyHash's.
func HostHash(host []byte) uint64 { return KeyHash(host) }

func (t *Hosts) init(s *Segment) {
	base := s.layout.hosts.off
	t.stores = s.word(base)
	t.evictions = s.word(base + 8)
	t.control = unsafe.Pointer(&s.mem[base])
	t.capacity = uint64(s.layout.HostCapacity)
	t.slots = unsafe.Pointer(&s.mem[base+lineSize])
}

func (t *Hosts) word(slot uint64, i int) *uint64 {
	return (*uint64)(unsafe.Add(t.slots, slot*hostSlotSize+uint64(8*i)))
}

// Load returns the host's state, if the table holds it. Any process may call it.
func (t *Hosts) Load(hash uint64) (HostState, bool) {
	home := hash % t.capacity
	for k := range uint64(min(hostWindow, t.capacity)) {
		i := (home + k) % t.capacity
		if atomic.LoadUint64(t.word(i, 1)) != hash {
			continue
		}
		if st, ok := t.read(i); ok && st.Hash == hash {
			return st, true
		}
	}
	return HostState{}, false
}

// read copies slot i under its sequence lock; ok is false if the slot stayed in a write.
func (t *Hosts) read(i uint64) (HostState, bool) {
	for range seqReadAttempts {
		seq := atomic.LoadUint64(t.word(i, 0))
		if seq&1 != 0 {
			continue
		}
		var w [hostWords]uint64
		for j := 1; j < hostWords; j++ {
			w[j] = atomic.LoadUint64(t.word(i, j))
		}
		n := min(int(w[6]>>24&0xffff), MaxHostName)
		var name [MaxHostName]byte
		for off := 0; off < n; off += 8 {
			binary.LittleEndian.PutUint64(name[off:], atomic.LoadUint64(t.word(i, hostWords+off/8)))
		}
		if atomic.LoadUint64(t.word(i, 0)) != seq {
			continue
		}
		return HostState{
			Hash: w[1], PausedUntilMs: int64(w[2]), Limit: uint32(w[3]),
			ErrStreak: uint32(w[4]), OKStreak: uint32(w[4] >> 32), SinceMs: int64(w[5]),
			Cause: HostCause(w[6]), Status: uint16(w[6] >> 8), Host: string(name[:n]),
		}, true
	}
	return HostState{}, false
}

// Store writes st into its host's slot: the slot that holds it, else a free one of its window,
// else the one whose state matters least (not paused, or paused until the soonest), whose host
// is evicted and counted. A paused host is evicted only for one paused until later: never for
// a host merely throttled, nor for one paused no longer than it. When the window holds none it
// may evict, st is not stored and Store returns false. Only worker 0 may call it.
func (t *Hosts) Store(st HostState) (stored bool) {
	if st.Hash == 0 {
		st.Hash = HostHash([]byte(st.Host))
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	i, evict := t.slotFor(st.Hash)
	if evict && !outranks(st.PausedUntilMs, int64(atomic.LoadUint64(t.word(i, 2)))) {
		return false
	}
	if evict {
		atomic.AddUint64(t.evictions, 1)
	}
	name := st.Host[:min(len(st.Host), MaxHostName)]
	seq := atomic.AddUint64(t.word(i, 0), 1)
	if seq&1 == 0 { // a writer was killed mid-write: make it odd now
		seq = atomic.AddUint64(t.word(i, 0), 1)
	}
	atomic.StoreUint64(t.word(i, 1), st.Hash)
	atomic.StoreUint64(t.word(i, 2), uint64(st.PausedUntilMs))
	atomic.StoreUint64(t.word(i, 3), uint64(st.Limit))
	atomic.StoreUint64(t.word(i, 4), uint64(st.ErrStreak)|uint64(st.OKStreak)<<32)
	atomic.StoreUint64(t.word(i, 5), uint64(st.SinceMs))
	atomic.StoreUint64(t.word(i, 6), uint64(st.Cause)|uint64(st.Status)<<8|uint64(len(name))<<24)
	var word [8]byte
	for off := 0; off < len(name); off += 8 {
		clear(word[:])
		copy(word[:], name[off:])
		atomic.StoreUint64(t.word(i, hostWords+off/8), binary.LittleEndian.Uint64(word[:]))
	}
	atomic.StoreUint64(t.word(i, 0), seq+1)
	atomic.AddUint64(t.stores, 1)
	return true
}

// outranks reports whether a host paused until until (0: not paused) may take the slot of one
// paused until victim: a host that is not paused only from another that is not, a paused one
// only from one paused until sooner.
func outranks(until, victim int64) bool {
	return victim == 0 || until > victim
}

// slotFor picks the slot Store writes hash into, and whether that evicts another host.
func (t *Hosts) slotFor(hash uint64) (slot uint64, evict bool) {
	home := hash % t.capacity
	window := uint64(min(hostWindow, t.capacity))
	free, victim := -1, home
	victimUntil := int64(-1)
	for k := range window {
		i := (home + k) % t.capacity
		h := atomic.LoadUint64(t.word(i, 1))
		if h == hash {
			return i, false
		}
		if h == 0 && free < 0 {
			free = int(i)
			continue
		}
		until := int64(atomic.LoadUint64(t.word(i, 2)))
		if victimUntil < 0 || until < victimUntil {
			victim, victimUntil = i, until
		}
	}
	if free >= 0 {
		return uint64(free), false
	}
	return victim, true
}

// Delete frees the host's slot: the host is back at its defaults. Only worker 0 may call it.
func (t *Hosts) Delete(hash uint64) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	home := hash % t.capacity
	for k := range uint64(min(hostWindow, t.capacity)) {
		i := (home + k) % t.capacity
		if atomic.LoadUint64(t.word(i, 1)) != hash {
			continue
		}
		seq := atomic.AddUint64(t.word(i, 0), 1)
		if seq&1 == 0 {
			seq = atomic.AddUint64(t.word(i, 0), 1)
		}
		atomic.StoreUint64(t.word(i, 1), 0)
		atomic.StoreUint64(t.word(i, 0), seq+1)
	}
}

// Snapshot returns every host the table holds, in slot order. Any process may call it.
func (t *Hosts) Snapshot() []HostState {
	var out []HostState
	for i := range t.capacity {
		if atomic.LoadUint64(t.word(i, 1)) == 0 {
			continue
		}
		if st, ok := t.read(i); ok && st.Hash != 0 {
			out = append(out, st)
		}
	}
	return out
}

// HostStats counts the table's writes and evictions.
type HostStats struct {
	Capacity  int
	Stores    uint64
	Evictions uint64
}

// Stats returns the table's counters.
func (t *Hosts) Stats() HostStats {
	return HostStats{Capacity: int(t.capacity), Stores: atomic.LoadUint64(t.stores), Evictions: atomic.LoadUint64(t.evictions)}
}
