package funnel

import (
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/store"
)

// Row hints: the rows worker 0's sweep just published, as its pass read them, so that the
// funnel can apply their results without reading each row from Badger again. At a million
// rows that read was a tenth of worker 0's CPU (docs/BENCHMARKS.md).
//
// Invariant RH1: a hinted row is the key's schedule row as Badger holds it. The funnel is
// Badger's only writer, and every write it stages drops the key's hint first. The sweep hints
// a row before it asks Changes whether a write of the key was in flight when its pass took its
// snapshot or began since, and drops the hint when one was (sweep.RowHints). So any write of
// the key is in the snapshot, or seen by that check, or begins after the check and drops the
// hint when it is staged.
//
// Only a result (Modify) uses a hint, once: the lookup that uses it removes it. Every other
// write reads the row as before. With invariants enabled the funnel reads the row anyway and
// panics if the hint differs. A hint that is never used (its row left the set before it was
// rendered) stays until the map reaches maxRowHints and is emptied: a lost hint costs a read,
// never a wrong row.

// maxRowHints bounds the hints held: 26 ready sets of the default 5,000 entries, about 23 MB
// at most with 100-byte keys. A set configured larger empties the map more often, and its
// hints help less.
const maxRowHints = 1 << 17

// rowHints is the hints held: key → the row the sweep published, unwritten since.
type rowHints struct {
	mu sync.Mutex
	m  map[string]store.Row
}

// HintRow records row as key's schedule row as the caller's pass read it. The caller must
// hold to RH1: see sweep.RowHints.
func (f *Funnel) HintRow(key []byte, row store.Row) {
	h := &f.hints
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxRowHints {
		h.m = make(map[string]store.Row)
	}
	h.m[string(key)] = row
}

// DropHint forgets key's hint, if any.
func (f *Funnel) DropHint(key []byte) {
	h := &f.hints
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, string(key))
}

// HintsUsed is how many results were applied over a row hint since Start.
func (f *Funnel) HintsUsed() uint64 { return f.hintsUsed.Load() }

// takeHint returns and forgets key's hint.
func (f *Funnel) takeHint(key []byte) (store.Row, bool) {
	h := &f.hints
	h.mu.Lock()
	defer h.mu.Unlock()
	row, ok := h.m[string(key)]
	if ok {
		delete(h.m, string(key))
	}
	return row, ok
}

// checkHint panics unless hinted is o's row as txn reads it (RH1).
func checkHint(txn *badger.Txn, o *op, hinted store.Row) {
	item, err := txn.Get(o.sKey)
	if err != nil {
		panic(fmt.Sprintf("store: invariant RH1: row %q is hinted, and its read returned %v", o.key, err))
	}
	var row store.Row
	if err := item.Value(row.UnmarshalBinary); err != nil {
		panic(fmt.Sprintf("store: invariant RH1: row %q: %v", o.key, err))
	}
	if row != hinted {
		panic(fmt.Sprintf("store: invariant RH1: row %q is hinted as %+v, Badger holds %+v", o.key, hinted, row))
	}
}
