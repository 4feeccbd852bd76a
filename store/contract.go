package store

import "context"

// Store is everything the rest of freshq asks of a schedule store. Two backends implement it:
// *badgerstore.Store (the embedded single-node default) and *pgstore.Store (PostgreSQL).
// Nothing above this package knows which one it holds; the conformance suite in
// store/storetest runs the same tests against both.
//
// Every backend keeps the promises of the package doc, in its own words:
//   - One funnel. WriteSchedules, WriteSchedule, RefileIfUnchanged, DeleteTarget and Modify are
//     the only writes. A schedule row and its due-index entry change together, atomically, and
//     a Write's row, target and page commit in one transaction.
//   - The floor (F1). Every write lowers the floor of the row it files, before or in the
//     transaction that files it; a pass advances the floor only to a point below which no row
//     can be, counting writes in flight. After any advance, no row is due below the floor.
//   - No wall clock. Every decision that depends on time takes nowMs as a parameter.
type Store interface {
	// GetSchedule, GetTarget and GetPage read one record of cacheKey, or return ErrNotFound.
	GetSchedule(cacheKey []byte) (Row, error)
	GetTarget(cacheKey []byte) (Target, error)
	GetPage(cacheKey []byte) (Page, error)
	// ForEachSchedule calls fn for every schedule row whose key starts with prefix, in key
	// order. key and row are valid only during the call.
	ForEachSchedule(prefix []byte, fn func(key []byte, row Row) error) error
	// ListSchedule returns the schedule rows whose key starts with prefix and is strictly
	// greater than after (nil: from the prefix's first key; after need not start with
	// prefix), in key order, at most limit of them (ErrInvalidArgument unless limit > 0),
	// from one snapshot. It starts at after and stops at limit or at the prefix's end, so a
	// call reads at most limit rows however deep into the prefix after lies: a Badger seek,
	// a range scan of PostgreSQL's primary key. A caller pages through a prefix of millions of
	// keys by passing the last key it got as the next call's after. The keys are the caller's.
	ListSchedule(ctx context.Context, prefix, after []byte, limit int) ([]KeyRow, error)

	// WriteSchedule files one schedule; WriteSchedules files ws, each Write atomic (see
	// badgerstore.Store.WriteSchedules for the contract of a call too large for one transaction, and
	// PartialWriteError).
	WriteSchedule(sch Schedule) error
	WriteSchedules(ws []Write) error
	// Modify is the funnel's read-modify-write (see Change): it reports which changes it filed.
	Modify(changes []Change) (applied []bool, err error)
	// RefileIfUnchanged files sch only over a row still equal to was, and reports whether it
	// did (the sweep's unpin hatch).
	RefileIfUnchanged(sch Schedule, was Row) (bool, error)
	// DeleteTarget removes every record of cacheKey at once. A key with none is no error.
	DeleteTarget(cacheKey []byte) error

	// BeginPass opens a sweep pass at nowMs (see Pass).
	BeginPass(nowMs int64) (Pass, error)
	// HeadMs is where a scan for due rows may start: no schedule row is due below it.
	HeadMs() int64
	// ScanDue and ScanDueAfter are the floored index scan, the claim path's fallback: due rows
	// in ascending (due, key) order from floorMs, or strictly after a cursor, up to nowMs.
	ScanDue(floorMs, nowMs int64, limit int) (ScanResult, error)
	ScanDueAfter(afterMs int64, afterKey []byte, nowMs int64, limit int) (ScanResult, error)

	// RowsBelowFloor counts, up to limit, the rows due below their floor: none, by F1. A node
	// exports it as an alarm.
	RowsBelowFloor(limit int) (int, error)

	// Reconcile gives every target without a schedule row one, due at nowMs, and reports how
	// many it restored. VerifyIndex checks that rows and due-index entries agree.
	Reconcile(nowMs int64) (restored int, err error)
	VerifyIndex() (IndexReport, error)
	// StartGC and StopGC run the backend's own background maintenance, if it has any; StopGC
	// is safe before StartGC and twice.
	StartGC()
	StopGC()
	// Close drains the funnel (every accepted call is committed and acknowledged) and
	// releases the backend. Safe to call twice.
	Close() error
}

// Pass is one sweep pass over the due index: a consistent snapshot, the floor as it was when
// the snapshot was taken, one ascending iteration, and at most one floor advance bounded by
// what no write, committed or in flight, can have put below it. A Pass is used by one
// goroutine; close it promptly, since it pins a snapshot.
//
//	p, err := st.BeginPass(nowMs)
//	defer p.Close()
//	err = p.IterateDue(maxRows, chunk, func(rows []store.DueRow) error { … })
//	floor, moved := p.AdvanceFloor(guardMs)
type Pass interface {
	// IterateDue hands the due rows of the snapshot, from the floor up to now, to fn in chunks
	// of at most chunk rows, reading at most maxRows (0 = no cap). The order is the backend's:
	// ascending (due, key) on Badger, whose index is that order; the table's own on PostgreSQL
	// when every due row is read, since the caller scores them all and a sort would cost more
	// than the read. A pass that stops at maxRows with more rows due (Stats().Capped) read the
	// maxRows earliest in (due, key) order, except on PostgreSQL when the cap binds without
	// warning (see pgstore), and Stats().FirstDueMs is the earliest due time read in any order.
	// Slices and keys are valid only until fn returns. Callable once per pass.
	IterateDue(maxRows, chunk int, fn func([]DueRow) error) error
	// Stats is what the pass observed.
	Stats() PassStats
	// AdvanceFloor moves the floor up to (at most) min(first due row, now) − guardMs, when no
	// write can have filed a row below that, and returns the floor and whether it moved.
	AdvanceFloor(guardMs int64) (floorMs int64, advanced bool)
	// Close releases the snapshot. Safe to call twice.
	Close()
}

// Change is one read-modify-write of the funnel: the backend reads Key's schedule row and
// target inside the transaction that will commit the change, and Decide turns them into the
// Write to file. Decide runs once per Change, on the funnel's goroutine, with no other write
// of Key between its read and the commit; it must be quick and must not call the store.
// Returning ok false files nothing for Key. The Write's schedule must be Key's.
//
// Modify is how a result is applied with one read per key: the caller does not read the row
// and the target itself only for the funnel to read the row again.
type Change struct {
	Key []byte
	// MinDueMs is the earliest due time Decide may return. The floor must be lowered for a
	// write before it commits, and Decide runs inside the commit, so the funnel lowers it for
	// MinDueMs beforehand (a result's decision is due no earlier than its now).
	MinDueMs int64
	Decide   func(cur Current) (w Write, ok bool, err error)
}

// Current is what a Change's Decide sees of its key. A missing target is the zero Target with
// HasTarget false; a missing row is HasRow false.
type Current struct {
	Row       Row
	HasRow    bool
	Target    Target
	HasTarget bool
	// NotOwner is set when the executing node does not hold the key's shard at the epoch it
	// believes, read in the transaction (a cluster on PostgreSQL; never on Badger). A change
	// is a result decided on a grant of that node, so the store files nothing for it, whatever
	// Decide returns; Decide is still called, so that the caller can report it fenced.
	NotOwner bool
}

// SharedPageReader is a Store that can read a page without copying its body. GetPageShared
// returns what GetPage returns, but the page's Body may be the store's own memory: the caller
// must never modify it. The crawler listener reads pages this way, so a hot page costs no
// allocation of its size per request. *badgerstore.Store implements it.
type SharedPageReader interface {
	GetPageShared(cacheKey []byte) (Page, error)
}
