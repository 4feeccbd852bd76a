package store

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Pass is one sweep pass over the due index: a snapshot, the floor as it was when the snapshot
// was taken, one iteration, and at most one floor advance bounded by what the iteration could
// have seen (protocol.go). A Pass is used by one goroutine; close it when done, since it pins a
// Badger read snapshot.
//
//	p, err := st.BeginPass(nowMs)
//	defer p.Close()
//	err = p.IterateDue(maxRows, chunk, func(rows []store.DueRow) error { … })
//	floor, moved := p.AdvanceFloor(guardMs)
type Pass struct {
	s          *Store
	txn        *badger.Txn // the snapshot, taken in registerPass
	stats      PassStats
	minWritten int64 // guarded by Store.floorMu
	closed     bool  // guarded by Store.floorMu
	iterated   bool
}

// PassStats is what a pass observed.
type PassStats struct {
	// NowMs is the pass's now, fixed at BeginPass. FloorMs is the floor it read in the same
	// critical section as its snapshot: the iteration starts there.
	NowMs   int64
	FloorMs int64
	// Rows is how many due rows the iteration read.
	Rows int
	// FirstDueMs is the first due row observed (the minimum at or above the floor), valid
	// when HasFirstDue.
	FirstDueMs  int64
	HasFirstDue bool
	// NextDueMs is the first not-yet-due time seen (the first index key past now), valid
	// when HasNextDue: the node is not idle if a row falls due in 30 s.
	NextDueMs  int64
	HasNextDue bool
	// Capped is true when the iteration stopped at maxRows with more due rows waiting. The
	// index is ascending, so a capped pass kept the oldest rows and missed the recently due.
	Capped bool
	// Complete is true when the iteration reached a row past now or the end of the index.
	Complete bool
}

// BeginPass opens a pass at nowMs (≥ 0): it takes a snapshot of the store and reads the floor
// in one critical section with the funnel's registration of in-flight batches.
func (s *Store) BeginPass(nowMs int64) (*Pass, error) {
	if nowMs < 0 {
		return nil, fmt.Errorf("%w: negative now %d", ErrInvalidArgument, nowMs)
	}
	if s.closed.Load() {
		return nil, ErrClosed
	}
	p := &Pass{s: s}
	p.stats.NowMs = nowMs
	s.registerPass(p)
	return p, nil
}

// IterateDue reads the due index of the pass's snapshot from the floor up to now, key-only
// (prefetch off; the projection is the index entry's inline value, so no schedule row and no
// value-log entry is read), and hands the rows to fn in chunks of at most chunk rows, in
// ascending due order. It reads at most maxRows rows (0 = no cap).
//
// The rows slice and every Key in it are valid only until fn returns: both are reused for the
// next chunk. Copy what must outlive the call. An error from fn stops the iteration and is
// returned as is.
//
// IterateDue may be called once per pass (ErrPassIterated otherwise). Writes made during the
// iteration are not seen by it; the floor protocol accounts for them.
func (p *Pass) IterateDue(maxRows, chunk int, fn func([]DueRow) error) error {
	switch {
	case p.isClosed():
		return ErrClosed
	case p.iterated:
		return ErrPassIterated
	case maxRows < 0 || chunk <= 0:
		return fmt.Errorf("%w: maxRows %d, chunk %d", ErrInvalidArgument, maxRows, chunk)
	}
	p.iterated = true
	rows := make([]DueRow, 0, chunk)
	arena := make([]byte, 0, chunk*96)
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		err := fn(rows)
		rows, arena = rows[:0], arena[:0]
		return err
	}
	var fnErr error
	st, err := walkDue(p.txn, p.stats.FloorMs, p.stats.NowMs, maxRows, func(key []byte, r *Row) error {
		if len(arena)+len(key) > cap(arena) {
			// The arena is full: start a new one rather than grow this one, so keys
			// already in rows stay put.
			arena = make([]byte, 0, max(cap(arena), 2*len(key)))
		}
		arena = append(arena, key...)
		rows = append(rows, DueRow{Key: arena[len(arena)-len(key) : len(arena) : len(arena)], Row: *r})
		if len(rows) == chunk {
			if fnErr = flush(); fnErr != nil {
				return fnErr
			}
		}
		return nil
	})
	if err == nil {
		err = flush()
		fnErr = err
	}
	p.stats.Rows = st.rows
	p.stats.FirstDueMs, p.stats.HasFirstDue = st.firstDue, st.hasFirstDue
	p.stats.NextDueMs, p.stats.HasNextDue = st.nextDue, st.hasNextDue
	p.stats.Capped, p.stats.Complete = st.capped, st.complete
	if err != nil && err != fnErr {
		return fmt.Errorf("store: iterate due from %d: %w", p.stats.FloorMs, err)
	}
	return err
}

// Stats returns what the pass has observed so far.
func (p *Pass) Stats() PassStats { return p.stats }

// AdvanceFloor moves the floor up to min(firstDue, now, earliest write in flight at or
// committed after the snapshot) − guardMs, by compare-and-swap from the floor the pass
// observed, and returns the floor as it then stands and whether this call moved it. It does
// nothing if the pass has not iterated, stopped before observing any row, or was closed, or
// if the bound is not above the observed floor, or if the CAS loses (a write lowered the floor
// meanwhile: the next pass will try again).
func (p *Pass) AdvanceFloor(guardMs int64) (floorMs int64, advanced bool) {
	if guardMs < 0 {
		return p.s.floor.Load(), false
	}
	return p.s.advance(p, guardMs)
}

// Close releases the pass's snapshot. It is safe to call twice.
func (p *Pass) Close() {
	if p.s.unregisterPass(p) {
		p.txn.Discard()
	}
}
