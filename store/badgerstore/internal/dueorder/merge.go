package dueorder

import (
	"bytes"
	"container/heap"
	"fmt"
	"math"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/internal/invariants"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// The due order of a store that keeps its due index under classes (badgerstore's classindex.go). Such a store
// writes no d/ entries: the class index holds every row once, ordered by (class, due, key), and
// the rows in due order are the merge of its classes. WalkClasses is that merge, and it is what
// the floored scan (ScanDue), a pass's IterateDue and the floor's head read in such a store.
//
// The merge keeps one run of buffered rows per class it has opened, in a heap ordered by each
// run's first row (due, then key: the order of the d/ index it replaces). Opening a class, and
// reading on once its run is spent, costs a seek, about 10 µs on a large store, so a merge that
// sought every class would cost a claim's scan of one row 3 ms over 300 classes. It does not:
// the store keeps a lower bound of every class's due times (the class bounds, badgerstore's protocol.go), and
// a class waits in the heap, unopened, under its bound. It is opened only when its bound comes
// first, that is when one of its rows could be the next row of the walk. A scan of a page of rows
// from the head opens the classes whose bound lies at or before the page's last row, not all.
//
// A run reads a class no further than its first row past now: that row is the class's say in
// the walk's next due time, and nothing after it can be. Each class it opens has an iterator
// of its own, bounded to the class (NewClassIterator), so that a class with nothing past the
// cursor ends there, not in the tombstones at the head of the class after it.

// classHeadRows is how many rows the merge reads when it opens a class, classRunRows how many
// it reads on each later seek into the class: few at first, since a scan of a page of rows may
// need only the head of each class it opens, and enough after that for a long walk to seek
// rarely.
const (
	classHeadRows = 4
	classRunRows  = 64
)

// NewClassIterator returns a key-only iterator over one class's entries. Its prefix is the
// class's, so that neither a seek nor a step past the class's last row reads on into the next
// class: the head of a class holds the tombstones of the rows that left it (a rendered row
// leaves the never-rendered lane's class), and Badger's iterator steps over tombstones one by
// one, reading two live entries ahead. An iterator over the whole index, sought to a class
// with no row left past the cursor, would read through the next class's tombstones to its
// first rows.
func NewClassIterator(txn *badger.Txn, class uint32) *badger.Iterator {
	return txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: keyspace.ClassPrefix(class)})
}

// classRun is one class in the merge: unopened, waiting under its bound, or opened, with its
// buffered rows in due order (their keys are copies).
type classRun struct {
	class   uint32
	opened  bool
	it      *badger.Iterator // the class's own (NewClassIterator), from its opening
	boundMs int64            // unopened: where the class's rows start, no earlier than the walk's cursor
	rows    []store.DueRow
	next    int  // rows[next] is the class's first row not yet handed out
	more    bool // the class may hold rows after rows[len(rows)-1] that the walk needs
}

// at returns the (due, key) the run sorts at: its first row, or, unopened, its bound with the
// least key, which sorts before every row of that due time.
func (r *classRun) at() (int64, []byte) {
	if !r.opened {
		return r.boundMs, nil
	}
	d := &r.rows[r.next]
	return d.DueAtMs, d.Key
}

// runHeap orders runs by at.
type runHeap []*classRun

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	da, ka := h[i].at()
	db, kb := h[j].at()
	if da != db {
		return da < db
	}
	return bytes.Compare(ka, kb) < 0
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(*classRun)) }
func (h *runHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}

// readRun fills r with the rows of its class from its current position on, at most n of them
// and none past the first row due after nowMs. It leaves r.more set when the class has a row it
// did not read and the walk could need.
func readRun(it *badger.Iterator, r *classRun, n int, nowMs int64) error {
	r.rows, r.next, r.more, r.opened = r.rows[:0], 0, false, true
	for ; it.Valid(); it.Next() {
		item := it.Item()
		class, due, key, err := keyspace.DecodeClass(item.Key())
		if err != nil {
			return err
		}
		if class != r.class {
			return nil
		}
		if len(r.rows) == n {
			r.more = true
			return nil
		}
		d := store.DueRow{Key: append([]byte(nil), key...)}
		if err := item.Value(d.Projection.UnmarshalBinary); err != nil {
			return fmt.Errorf("class entry %q: %w", key, err)
		}
		d.DueAtMs = due
		r.rows = append(r.rows, d)
		if due > nowMs {
			return nil
		}
	}
	return nil
}

// WalkClasses is WalkIndex over the class index: the rows of every class from the cursor on,
// merged in (due, key) order, with the same stopping rules and statistics. bounds must hold a
// lower bound of every class that has a row in txn's snapshot (B1); a class not in it is never
// read.
func WalkClasses(txn *badger.Txn, bounds []Bound, from Cursor, nowMs int64, maxRows int, visit func(key []byte, r *store.Row) error) (Stats, error) {
	var st Stats
	var opened []*badger.Iterator
	defer func() {
		for _, it := range opened {
			it.Close()
		}
	}()
	headRows := classHeadRows
	if maxRows > 0 {
		headRows = min(headRows, maxRows+1) // +1: a capped walk must see that a row follows
	}
	runs := make(runHeap, 0, len(bounds))
	for _, b := range bounds {
		if b.BoundMs == math.MaxInt64 {
			continue // no row
		}
		runs = append(runs, &classRun{class: b.Class, boundMs: max(b.BoundMs, from.Ms)})
	}
	heap.Init(&runs)

	var row store.Row
	prev := Cursor{Ms: -1}
	for len(runs) > 0 {
		r := runs[0]
		if !r.opened {
			// The class's bound comes first: one of its rows may be the walk's next.
			r.it = NewClassIterator(txn, r.class)
			opened = append(opened, r.it)
			// From the bound when it lies past the cursor: by B1 no row of the class is below
			// it, and the tombstones of the rows moved out of the class may be, which a seek
			// would step over one by one.
			seek := from.ClassSeek(r.class)
			if r.boundMs > from.Ms {
				seek = keyspace.Class(r.class, r.boundMs, nil)
			}
			r.it.Seek(seek)
			if err := readRun(r.it, r, headRows, nowMs); err != nil {
				return st, err
			}
			if len(r.rows) == 0 {
				heap.Pop(&runs)
				continue
			}
			heap.Fix(&runs, 0)
			continue
		}
		d := &r.rows[r.next]
		if invariants.Enabled {
			if d.DueAtMs < prev.Ms || (d.DueAtMs == prev.Ms && bytes.Compare(d.Key, prev.Key) <= 0) || d.DueAtMs < from.Ms {
				panic(fmt.Sprintf("store: invariant: class merge out of order: (%d, %q) after (%d, %q), from %d", d.DueAtMs, d.Key, prev.Ms, prev.Key, from.Ms))
			}
			prev = Cursor{Ms: d.DueAtMs, Key: d.Key}
		}
		if d.DueAtMs > nowMs {
			st.NextDue, st.HasNextDue, st.Complete = d.DueAtMs, true, true
			return st, nil
		}
		if maxRows > 0 && st.Rows >= maxRows {
			st.Capped = true
			return st, nil
		}
		if !st.HasFirstDue {
			st.FirstDue, st.HasFirstDue = d.DueAtMs, true
		}
		st.Rows++
		row = d.Row
		if err := visit(d.Key, &row); err != nil {
			return st, err
		}
		if r.next++; r.next < len(r.rows) {
			heap.Fix(&runs, 0)
			continue
		}
		if !r.more {
			heap.Pop(&runs)
			continue
		}
		last := r.rows[len(r.rows)-1]
		r.it.Seek(Cursor{Ms: last.DueAtMs, Key: last.Key, After: true}.ClassSeek(r.class))
		if err := readRun(r.it, r, classRunRows, nowMs); err != nil {
			return st, err
		}
		if len(r.rows) == 0 { // nothing after the run in this snapshot after all
			heap.Pop(&runs)
			continue
		}
		heap.Fix(&runs, 0)
	}
	st.Complete = true
	return st, nil
}

// ClassHeadsAt returns every class present in txn's snapshot that has a row at or after fromMs,
// with the due time of its first such row: one seek per class. Open seeds the class bounds with
// it (from 0); a pass's self-check reads the heads from its floor with it, without the bounds.
func ClassHeadsAt(txn *badger.Txn, fromMs int64) (map[uint32]int64, error) {
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(keyspace.PrefixClass)})
	defer it.Close()
	heads := make(map[uint32]int64)
	for it.Seek([]byte(keyspace.PrefixClass)); it.Valid(); {
		class, due, _, err := keyspace.DecodeClass(it.Item().Key())
		if err != nil {
			return nil, err
		}
		if due < fromMs {
			it.Seek(keyspace.Class(class, fromMs, nil))
			continue
		}
		heads[class] = due
		if class == math.MaxUint32 {
			break
		}
		it.Seek(keyspace.Class(class+1, fromMs, nil))
	}
	return heads, nil
}
