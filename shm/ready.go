package shm

import (
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// The ready buffer holds the sweep's best rows for the render workers to take without reading
// any index. It has one writer (worker 0's sweep) and any number of readers in any number of
// processes.
//
// Control line (64 bytes, at the start of the section):
//
//	0   active        uint64  generation of the published slot; 0 = cold (nothing published yet)
//	8   flags         uint64  bit 0: disabled (queue.ready.enabled = false)
//	16  publishes     uint64  publishes since the segment was created
//	24  droppedKeys   uint64  entries dropped because their key exceeded the key capacity
//	32  overCapacity  uint64  entries dropped because the set exceeded the slot capacity
//	40  (reserved)
//
// Slot s ∈ {0,1} holds generation g when g%2 == s. Each slot is two header lines, then entries:
//
//	line 0:  0 gen          uint64  generation held; bit 63 set while the writer rewrites it
//	         8 count        uint64  entries in the generation
//	        16 publishedAt  int64   ms, when the writer published it
//	line 1:  0 cursor       uint64  tag(32) | next index(32); alone on its line, since every take writes it
//	entries: ReadyCapacity × EntrySize bytes, see entry layout in entry.go
//
// Protocol. The writer fills the inactive slot and flips `active`:
//
//  1. slot.gen    = g | writing      readers of the slot's previous generation now fail validation
//  2. entries[0:n] = …               plain copies; nobody may trust them yet
//  3. slot.count  = n
//  4. slot.cursor = tag(g) | 0       the generation's indexes start
//  5. slot.gen    = g
//  6. active      = g                new takes go to this slot
//
// A take loads active (g), then the slot's cursor. If the cursor's tag is not g's, the slot holds
// another generation and the take starts over. If the index is at or past count, the set is
// exhausted and the take returns without writing anything (idle workers must not ping-pong the
// cursor line). Otherwise it adds 1 to the cursor, which hands it a unique index i (R1). If the
// add's result carries another tag, the slot was republished in between; the index it consumed
// belongs to the newer generation and is given up (that entry is skipped for that generation,
// never handed out twice, and the row is still due, so the next sweep republishes it). Past count,
// it clamps the cursor back to count with a CAS from exactly the value its own add produced: the
// CAS fails if anyone moved the cursor since, and because the tag is part of the word it can never
// rewind a newer generation's cursor (R3). Within count, it copies entry i and then re-reads
// slot.gen; anything but g means the slot was being rewritten while it copied, and the copy is
// discarded (R2). Nothing in a take waits on the writer or on another reader (R4).
//
// The tag is the generation's low 32 bits: a tag repeats only after 2^32 publishes, about 8,000
// years at one publish a minute. The index cannot reach 2^32: it passes count only by the number
// of takes in flight at once, and ReadyCapacity is at most 2^24.
type Ready struct {
	seg         *Segment
	active      *uint64
	flags       *uint64
	publishes   *uint64
	droppedKeys *uint64
	overCap     *uint64
	slots       [2]slot
	capacity    uint64
	keyCap      uint32
	entrySize   uint64

	writeMu sync.Mutex // one publisher per process; across processes, only worker 0 publishes
}

type slot struct {
	gen         *uint64
	count       *uint64
	publishedAt *uint64
	cursor      *uint64
	entries     unsafe.Pointer
}

const (
	flagDisabled = 1 << 0
	genWriting   = 1 << 63

	// maxTakeAttempts bounds how often one Take starts over because the set changed under it.
	// Each restart means the writer published in the meantime, so exhausting it needs several
	// publishes during a single take.
	maxTakeAttempts = 8
)

func (r *Ready) init(s *Segment) {
	base := s.layout.ready.off
	r.seg = s
	r.active = s.word(base)
	r.flags = s.word(base + 8)
	r.publishes = s.word(base + 16)
	r.droppedKeys = s.word(base + 24)
	r.overCap = s.word(base + 32)
	r.capacity = uint64(s.layout.ReadyCapacity)
	r.keyCap = s.layout.KeyCapacity
	r.entrySize = uint64(s.layout.EntrySize)
	stride := slotStride(&s.layout)
	for i := range r.slots {
		off := base + readyControlSize + uint64(i)*stride
		r.slots[i] = slot{
			gen:         s.word(off),
			count:       s.word(off + 8),
			publishedAt: s.word(off + 16),
			cursor:      s.word(off + lineSize),
			entries:     unsafe.Pointer(&s.mem[off+slotHeaderSize]),
		}
	}
}

func cursorTag(w uint64) uint32   { return uint32(w >> 32) }
func cursorIndex(w uint64) uint64 { return w & math.MaxUint32 }
func tagOf(gen uint64) uint32     { return uint32(gen) }
func cursorWord(gen, index uint64) uint64 {
	return uint64(tagOf(gen))<<32 | index
}

// KeyHash is the 64-bit hash every process uses for a cache key: it is stored in each entry and
// is the lease table's key. It is stable across processes and builds (xxhash64), and never 0,
// because 0 marks an unused lease slot.
func KeyHash(key []byte) uint64 {
	h := xxhash.Sum64(key)
	if h == 0 {
		h = 1
	}
	return h
}

// PublishResult describes one publish.
type PublishResult struct {
	Gen          uint64 // the generation now active
	Published    int    // entries in it
	DroppedKeys  int    // entries dropped: key longer than the key capacity (never truncated)
	OverCapacity int    // entries dropped: beyond the slot's capacity
}

// Publish writes entries, in the order given (the order takes will hand them out), as the next
// generation into the inactive slot, then makes it active. Entries whose key exceeds the key
// capacity are dropped and counted: a truncated key would name another row. Entries beyond the
// slot capacity are dropped and counted too. Publish never waits for readers (R4).
//
// Only one process may publish (worker 0); Publish serialises callers within a process.
func (r *Ready) Publish(entries []Entry, nowMs int64) PublishResult {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()

	g := atomic.LoadUint64(r.active) + 1
	s := &r.slots[g&1]
	atomic.StoreUint64(s.gen, g|genWriting)
	step(StepPublishMarked)

	var res PublishResult
	n := uint64(0)
	for i := range entries {
		e := &entries[i]
		if len(e.Key) > int(r.keyCap) {
			res.DroppedKeys++
			continue
		}
		if n == r.capacity {
			res.OverCapacity++
			continue
		}
		writeEntry(r.entryAt(s, n), e)
		step(StepPublishEntry)
		n++
	}
	atomic.StoreUint64(s.count, n)
	atomic.StoreUint64(s.publishedAt, uint64(nowMs))
	step(StepPublishCounted)
	atomic.StoreUint64(s.cursor, cursorWord(g, 0))
	step(StepPublishCursorReset)
	atomic.StoreUint64(s.gen, g)
	step(StepPublishSealed)
	atomic.StoreUint64(r.active, g)
	step(StepPublishFlipped)

	atomic.AddUint64(r.publishes, 1)
	atomic.AddUint64(r.droppedKeys, uint64(res.DroppedKeys))
	atomic.AddUint64(r.overCap, uint64(res.OverCapacity))
	res.Gen, res.Published = g, int(n)
	return res
}

func (r *Ready) entryAt(s *slot, i uint64) unsafe.Pointer {
	return unsafe.Add(s.entries, i*r.entrySize)
}

// TakeStatus is the outcome of a Take.
type TakeStatus uint8

const (
	// Taken: the entry was filled with a row of the generation in Entry.Gen.
	Taken TakeStatus = iota
	// Cold: nothing has been published yet.
	Cold
	// Exhausted: every entry of the active generation has been handed out.
	Exhausted
	// Disabled: the ready set is switched off (queue.ready.enabled = false).
	Disabled
	// Busy: the set was republished under this take several times in a row; nothing was taken.
	Busy
)

func (s TakeStatus) String() string {
	switch s {
	case Taken:
		return "taken"
	case Cold:
		return "cold"
	case Exhausted:
		return "exhausted"
	case Disabled:
		return "disabled"
	case Busy:
		return "busy"
	}
	return "unknown"
}

// Take hands out the next entry of the active generation into e, reusing e.Key's storage. On any
// status but Taken, e's contents are unspecified. Take is lock-free and never blocks the writer
// or another reader; see the protocol above for R1–R4.
func (r *Ready) Take(e *Entry) TakeStatus {
	for range maxTakeAttempts {
		if atomic.LoadUint64(r.flags)&flagDisabled != 0 {
			return Disabled
		}
		g := atomic.LoadUint64(r.active)
		step(StepTakeLoadedActive)
		if g == 0 {
			return Cold
		}
		s := &r.slots[g&1]
		w := atomic.LoadUint64(s.cursor)
		step(StepTakeLoadedCursor)
		if cursorTag(w) != tagOf(g) {
			continue // the slot holds another generation: reload active
		}
		n := atomic.LoadUint64(s.count)
		if cursorIndex(w) >= n {
			return Exhausted // load before add: an exhausted set costs no write
		}
		old := atomic.AddUint64(s.cursor, 1) - 1
		step(StepTakeAdded)
		if cursorTag(old) != tagOf(g) {
			continue // republished since the load: the index we consumed is not ours to use
		}
		i := cursorIndex(old)
		if i >= n {
			r.clamp(s, old+1, g, n)
			return Exhausted
		}
		readEntry(r.entryAt(s, i), e, r.keyCap)
		step(StepTakeCopied)
		if atomic.LoadUint64(s.gen) != g {
			continue // rewritten while we copied (R2): discard the copy
		}
		e.Gen, e.Index = g, uint32(i)
		return Taken
	}
	return Busy
}

// clamp moves an overshot cursor back to count, but only from the exact value this take's add
// left (R3). A failed CAS means another take moved it since; that take clamps instead, or the
// slot was republished and the cursor belongs to a newer generation, which must not be touched.
func (r *Ready) clamp(s *slot, left, g, n uint64) {
	if plainStoreClamp() {
		atomic.StoreUint64(s.cursor, cursorWord(g, n)) // the known bug, reachable only in shmstep tests
	} else {
		atomic.CompareAndSwapUint64(s.cursor, left, cursorWord(g, n))
	}
	step(StepTakeClamped)
}

// SetEnabled switches the ready set on or off for every attached process. A disabled set makes
// every Take return Disabled at once, so claims fall back to the index scan on their next try.
func (r *Ready) SetEnabled(on bool) {
	for {
		old := atomic.LoadUint64(r.flags)
		nw := old &^ flagDisabled
		if !on {
			nw |= flagDisabled
		}
		if atomic.CompareAndSwapUint64(r.flags, old, nw) {
			return
		}
	}
}

// Enabled reports whether takes are allowed.
func (r *Ready) Enabled() bool { return atomic.LoadUint64(r.flags)&flagDisabled == 0 }

// ReadyStats is a snapshot of the ready buffer for /v1/queue and /metrics. The fields are read
// one by one, so a publish between them can make the snapshot mix two generations.
type ReadyStats struct {
	Gen           uint64 // active generation; 0 = cold
	Count         uint64 // entries in it
	Taken         uint64 // entries handed out (or given up in a race) so far
	PublishedAtMs int64
	Enabled       bool
	Publishes     uint64
	DroppedKeys   uint64
	OverCapacity  uint64
}

// Stats returns a snapshot of the ready buffer.
func (r *Ready) Stats() ReadyStats {
	st := ReadyStats{
		Gen:          atomic.LoadUint64(r.active),
		Enabled:      r.Enabled(),
		Publishes:    atomic.LoadUint64(r.publishes),
		DroppedKeys:  atomic.LoadUint64(r.droppedKeys),
		OverCapacity: atomic.LoadUint64(r.overCap),
	}
	if st.Gen == 0 {
		return st
	}
	s := &r.slots[st.Gen&1]
	st.Count = atomic.LoadUint64(s.count)
	st.PublishedAtMs = int64(atomic.LoadUint64(s.publishedAt))
	if w := atomic.LoadUint64(s.cursor); cursorTag(w) == tagOf(st.Gen) {
		st.Taken = min(cursorIndex(w), st.Count)
	}
	return st
}
