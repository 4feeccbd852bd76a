package hosttable

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Table is the host table over its section of the segment (doc.go). Any process may read it;
// only worker 0 writes it.
type Table struct {
	stores, evictions *uint64
	control           unsafe.Pointer // the control line: the counters, then the farm words (farm.go)
	slots             unsafe.Pointer
	shares            unsafe.Pointer // the farm's shares, after the slots (farm.go)
	capacity          uint64

	writeMu sync.Mutex // one writer per process; across processes, only worker 0 writes
}

const (
	// ControlSize is the size of the control line, before the first slot.
	ControlSize = 64
	// SlotSize is the size of one slot.
	SlotSize  = 320
	slotWords = 8 // the slot's words before the name
	window    = 16
	// MaxName is the longest host name the table keeps: a DNS name has at most 253 bytes, and
	// a port adds six.
	MaxName = SlotSize - 8*slotWords
	// DefaultCapacity is the default number of slots; MaxCapacity the most a segment may have.
	DefaultCapacity = 1024
	MaxCapacity     = 1 << 20
	// seqReadAttempts bounds how often a reader retries a slot being rewritten.
	seqReadAttempts = 16
)

// Cause says why a host is not at its defaults (its name for people: hosts.CauseName).
type Cause uint8

const (
	CauseNone       Cause = iota
	CauseRetryAfter       // a 429, or a 503 with Retry-After, paused it
	CauseErrors           // consecutive 5xx or timeouts lowered its limit
)

// State is one host's politeness state, as a slot holds it.
type State struct {
	Host          string // as in the URL: host[:port]; at most MaxName bytes are kept
	Hash          uint64 // Hash(Host)
	PausedUntilMs int64  // no grant before this; 0 = not paused
	Limit         uint32 // renders in flight allowed now; 0 = the configured maximum
	ErrStreak     uint32 // consecutive 5xx or timeouts
	OKStreak      uint32 // consecutive successes since the limit last changed
	SinceMs       int64  // when the current pause or lowered limit began
	Cause         Cause
	Status        uint16 // the HTTP status that last changed the state; 0 for a timeout
}

// Hash is the 64-bit hash of a host name, never 0 (0 marks a free slot): xxhash64, the
// segment's key hash (shm.KeyHash).
func Hash(host []byte) uint64 {
	h := xxhash.Sum64(host)
	if h == 0 {
		h = 1
	}
	return h
}

// New returns the table over section, the host table's section of a segment: ControlSize +
// capacity × SlotSize + FarmSharesSize bytes, 8-byte aligned, as the segment's validated
// layout gives it.
func New(section []byte, capacity int) *Table {
	return &Table{
		stores:    (*uint64)(unsafe.Pointer(&section[0])),
		evictions: (*uint64)(unsafe.Pointer(&section[8])),
		control:   unsafe.Pointer(&section[0]),
		capacity:  uint64(capacity),
		slots:     unsafe.Pointer(&section[ControlSize]),
		shares:    unsafe.Pointer(&section[ControlSize+capacity*SlotSize]),
	}
}

func (t *Table) word(slot uint64, i int) *uint64 {
	return (*uint64)(unsafe.Add(t.slots, slot*SlotSize+uint64(8*i)))
}

// Load returns the host's state, if the table holds it. Any process may call it.
func (t *Table) Load(hash uint64) (State, bool) {
	home := hash % t.capacity
	for k := range uint64(min(window, t.capacity)) {
		i := (home + k) % t.capacity
		if atomic.LoadUint64(t.word(i, 1)) != hash {
			continue
		}
		if st, ok := t.read(i); ok && st.Hash == hash {
			return st, true
		}
	}
	return State{}, false
}

// read copies slot i under its sequence lock; ok is false if the slot stayed in a write.
func (t *Table) read(i uint64) (State, bool) {
	for range seqReadAttempts {
		seq := atomic.LoadUint64(t.word(i, 0))
		if seq&1 != 0 {
			continue
		}
		var w [slotWords]uint64
		for j := 1; j < slotWords; j++ {
			w[j] = atomic.LoadUint64(t.word(i, j))
		}
		n := min(int(w[6]>>24&0xffff), MaxName)
		var name [MaxName]byte
		for off := 0; off < n; off += 8 {
			binary.LittleEndian.PutUint64(name[off:], atomic.LoadUint64(t.word(i, slotWords+off/8)))
		}
		if atomic.LoadUint64(t.word(i, 0)) != seq {
			continue
		}
		return State{
			Hash: w[1], PausedUntilMs: int64(w[2]), Limit: uint32(w[3]),
			ErrStreak: uint32(w[4]), OKStreak: uint32(w[4] >> 32), SinceMs: int64(w[5]),
			Cause: Cause(w[6]), Status: uint16(w[6] >> 8), Host: string(name[:n]),
		}, true
	}
	return State{}, false
}

// Store writes st into its host's slot: the slot that holds it, else a free one of its window,
// else the one whose state matters least (not paused, or paused until the soonest), whose host
// is evicted and counted. A paused host is evicted only for one paused until later: never for
// a host merely throttled, nor for one paused no longer than it. When the window holds none it
// may evict, st is not stored and Store returns false. Only worker 0 may call it.
func (t *Table) Store(st State) (stored bool) {
	if st.Hash == 0 {
		st.Hash = Hash([]byte(st.Host))
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
	name := st.Host[:min(len(st.Host), MaxName)]
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
		atomic.StoreUint64(t.word(i, slotWords+off/8), binary.LittleEndian.Uint64(word[:]))
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
func (t *Table) slotFor(hash uint64) (slot uint64, evict bool) {
	home := hash % t.capacity
	window := uint64(min(window, t.capacity))
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
func (t *Table) Delete(hash uint64) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	home := hash % t.capacity
	for k := range uint64(min(window, t.capacity)) {
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
func (t *Table) Snapshot() []State {
	var out []State
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

// Stats counts the table's writes and evictions.
type Stats struct {
	Capacity  int
	Stores    uint64
	Evictions uint64
}

// Stats returns the table's counters.
func (t *Table) Stats() Stats {
	return Stats{Capacity: int(t.capacity), Stores: atomic.LoadUint64(t.stores), Evictions: atomic.LoadUint64(t.evictions)}
}
