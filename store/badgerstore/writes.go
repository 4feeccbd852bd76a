package badgerstore

import (
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/funnel"
)

// The writes of the store, every one through its funnel (package funnel), the only code that
// writes to Badger.

// WriteSchedule files one schedule through the funnel and returns once it has committed.
func (s *Store) WriteSchedule(sch store.Schedule) error { return s.fn.WriteSchedule(sch) }

// WriteSchedules files ws through the funnel and returns once all of them have committed.
//
// Each Write is atomic: its row, index entry, target and page commit together or not at all.
// The call as a whole is atomic only while it fits one Badger transaction (about 15 % of a
// memtable, tens of thousands of writes); a larger call is committed in several, in order, and
// if one fails the error is returned after the others are done, so some writes of a failed
// call may be durable. Writes of one key apply in slice order.
//
// When a call fails after some of its writes committed, the error is a *PartialWriteError
// saying which: a caller that must act once per durable write (worker 0 releases a result's
// lease once its write is durable) acts on those, and retries only the rest.
//
// Nothing is enqueued if any Write is invalid (ErrScheduleUnset, ErrInvalidTarget,
// ErrInvalidPage, ErrImplausibleDue). After Close it returns ErrClosed.
func (s *Store) WriteSchedules(ws []store.Write) error { return s.fn.WriteSchedules(ws) }

// DeleteTarget removes every record of cacheKey — schedule row, due-index entry, target and
// page — in one transaction, through the funnel. Deleting a key that has no records is not an
// error.
func (s *Store) DeleteTarget(cacheKey []byte) error { return s.fn.DeleteTarget(cacheKey) }

// Modify files the writes its Changes decide, each over its key's row and target as the
// funnel's transaction reads them (see Change): one read of each per change, where a caller
// that read them itself would have the funnel read the row again. It reports which changes
// were filed; a Decide that returned ok false, and one whose key vanished, leave false.
//
// A Change may be decided more than once, each time on a fresh read, when its transaction is
// rebuilt (a write refused, a transaction Badger finds too big); only the last decision is
// filed. The due time each returns must be at least its MinDueMs, which the funnel registers
// for the floor protocol before any Decide runs; a Write due earlier fails with
// ErrInvalidArgument. Errors are those of WriteSchedules, PartialWriteError included.
func (s *Store) Modify(changes []store.Change) ([]bool, error) { return s.fn.Modify(changes) }

// RefileIfUnchanged files sch only if cacheKey's schedule row is exactly was when the funnel
// applies the write, and reports whether it filed it. The sweep's unpin hatch uses it: the row
// it files forward is the one a pass read in its snapshot, and a write committed since (the
// row's render result, an operator's change) is newer than that picture and must stand.
func (s *Store) RefileIfUnchanged(sch store.Schedule, was store.Row) (bool, error) {
	return s.fn.RefileIfUnchanged(sch, was)
}

// refileIfAbsent files the schedules of ws only for keys that have no schedule row when the
// funnel applies them (Reconcile's repair; funnel.RefileIfAbsent).
func (s *Store) refileIfAbsent(ws []store.Write) (int, error) { return s.fn.RefileIfAbsent(ws) }

// Row hints (RH1; the funnel's hints.go): the rows worker 0's sweep just published, as its pass
// read them, so that the funnel applies their results without reading each row again.

// HintRow records row as key's schedule row as the caller's pass read it. The caller must
// hold to RH1: see sweep.RowHints.
func (s *Store) HintRow(key []byte, row store.Row) { s.fn.HintRow(key, row) }

// DropHint forgets key's hint, if any.
func (s *Store) DropHint(key []byte) { s.fn.DropHint(key) }

// HintsUsed is how many results were applied over a row hint since Open.
func (s *Store) HintsUsed() uint64 { return s.fn.HintsUsed() }

// protocol is the store as its funnel sees it (funnel.Protocol): the floor protocol's side of
// a batch (protocol.go) and the read view it publishes (readview.go).
type protocol Store

func (p *protocol) BeginBatch(b *funnel.Batch, minDue int64) { (*Store)(p).beginInflight(b, minDue) }
func (p *protocol) EndBatch(b *funnel.Batch)                 { (*Store)(p).endInflight(b) }
func (p *protocol) LowerClassBounds(lows map[uint32]int64)   { (*Store)(p).lowerClassBounds(lows) }
func (p *protocol) Committed()                               { (*Store)(p).publishView() }
