package badgerstore

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/dueorder"
)

// badgerPass is one sweep pass over the due index: a snapshot, the floor as it was when the snapshot
// was taken, one iteration, and at most one floor advance bounded by what the iteration could
// have seen (protocol.go). A badgerPass is used by one goroutine; close it when done, since it pins a
// Badger read snapshot.
//
//	p, err := st.BeginPass(nowMs)
//	defer p.Close()
//	err = p.IterateDue(maxRows, chunk, func(rows []store.DueRow) error { … })
//	floor, moved := p.AdvanceFloor(guardMs)
type badgerPass struct {
	s          *Store
	txn        *badger.Txn // the snapshot, taken in registerPass
	stats      store.PassStats
	minWritten int64 // guarded by Store.floorMu
	headMs     int64 // Store.head when the snapshot was taken
	closed     bool  // guarded by Store.floorMu
	iterated   bool
	classIts   map[uint32]*badger.Iterator // each class's iterator (classindex.go), opened on first use
	bounds     []dueorder.Bound            // the class bounds as the snapshot was taken (protocol.go: B1)
	// heads is every class's first row from the floor in the snapshot, once ClassHeads has
	// read them all: what AdvanceFloor raises the class bounds to.
	heads map[uint32]int64
}

// BeginPass opens a pass at nowMs (≥ 0): it takes a snapshot of the store and reads the floor
// in one critical section with the funnel's registration of in-flight batches.
func (s *Store) BeginPass(nowMs int64) (store.Pass, error) {
	if nowMs < 0 {
		return nil, fmt.Errorf("%w: negative now %d", store.ErrInvalidArgument, nowMs)
	}
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	p := &badgerPass{s: s}
	p.stats.NowMs = nowMs
	s.registerPass(p)
	s.catchUpView(p.txn.ReadTs())
	return p, nil
}

// IterateDue reads the due index of the pass's snapshot from the floor up to now, key-only
// (prefetch off; the projection is the index entry's inline value, so no schedule row and no
// value-log entry is read), and hands the rows to fn in chunks of at most chunk rows, in
// ascending due order. It reads at most maxRows rows (0 = no cap).
//
// fn runs on a goroutine of its own while the next chunk is read, so that the caller's work
// on a chunk (scoring, in the sweep) overlaps Badger's iteration instead of adding to it. The
// calls are still sequential and in order: fn never runs concurrently with itself, and every
// call has returned before IterateDue does. A panic in fn is re-raised on the caller's
// goroutine, so a caller's recover still catches it.
//
// The rows slice and every Key in it are valid only until fn returns: both are reused for the
// chunk after next. Copy what must outlive the call. An error from fn stops the iteration and
// is returned as is.
//
// IterateDue may be called once per pass (ErrPassIterated otherwise). Writes made during the
// iteration are not seen by it; the floor protocol accounts for them.
func (p *badgerPass) IterateDue(maxRows, chunk int, fn func([]store.DueRow) error) error {
	switch {
	case p.isClosed():
		return store.ErrClosed
	case p.iterated:
		return store.ErrPassIterated
	case maxRows < 0 || chunk <= 0:
		return fmt.Errorf("%w: maxRows %d, chunk %d", store.ErrInvalidArgument, maxRows, chunk)
	}
	p.iterated = true
	c := newChunkPipe(chunk, fn)
	defer c.close() // on every path, a panicking walk included: the consumer never leaks
	st, err := p.s.walkDue(p.txn, p.bounds, dueorder.Cursor{Ms: p.stats.FloorMs}, p.stats.NowMs, maxRows, c.add)
	if err == nil {
		err = c.flush()
	}
	fnErr := c.stop()
	p.stats.Rows = st.Rows
	p.stats.FirstDueMs, p.stats.HasFirstDue = st.FirstDue, st.HasFirstDue
	p.stats.NextDueMs, p.stats.HasNextDue = st.NextDue, st.HasNextDue
	p.stats.Capped, p.stats.Complete = st.Capped, st.Complete
	switch {
	case fnErr != nil:
		return fnErr
	case err != nil:
		return fmt.Errorf("store: iterate due from %d: %w", p.stats.FloorMs, err)
	}
	return nil
}

// chunkPipe batches rows into chunks and hands them to a consumer goroutine, double-buffered:
// while the consumer runs fn on one chunk the producer fills the other. A chunk goes back to
// the producer only after fn has returned on it, which is what keeps the keys of a chunk valid
// for the whole of fn's call. The producer holds at most one chunk, so a send on full never
// blocks.
type chunkPipe struct {
	fn     func([]store.DueRow) error
	size   int
	cur    *dueChunk      // the chunk the producer fills; nil once the consumer has gone
	full   chan *dueChunk // producer → consumer
	free   chan *dueChunk // consumer → producer, carrying fn's result on it
	done   chan struct{}  // closed when the consumer has exited
	closed bool           // full is closed; producer-side only

	// Written by the consumer, read by the producer only after done is closed.
	firstErr error
	panicked any
}

type dueChunk struct {
	rows  []store.DueRow
	arena []byte
	err   error // fn's result on this chunk, or the earlier error that made it skip
}

func newChunkPipe(size int, fn func([]store.DueRow) error) *chunkPipe {
	c := &chunkPipe{fn: fn, size: size, full: make(chan *dueChunk, 1), free: make(chan *dueChunk, 1), done: make(chan struct{})}
	c.free <- &dueChunk{rows: make([]store.DueRow, 0, size), arena: make([]byte, 0, size*96)}
	c.cur = &dueChunk{rows: make([]store.DueRow, 0, size), arena: make([]byte, 0, size*96)}
	go c.consume(c.full)
	return c
}

func (c *chunkPipe) consume(full <-chan *dueChunk) {
	defer close(c.done)
	defer func() { c.panicked = recover() }()
	for ch := range full {
		if c.firstErr == nil {
			c.firstErr = c.fn(ch.rows)
		}
		ch.rows, ch.arena, ch.err = ch.rows[:0], ch.arena[:0], c.firstErr
		c.free <- ch
	}
}

// add copies one row into the current chunk and sends the chunk when it is full. It returns
// fn's error, at most one chunk after fn reported it, to stop the walk.
func (c *chunkPipe) add(key []byte, r *store.Row) error {
	ch := c.cur
	if len(ch.arena)+len(key) > cap(ch.arena) {
		// The arena is full: start a new one rather than grow this one, so keys already in
		// rows stay put.
		ch.arena = make([]byte, 0, max(cap(ch.arena), 2*len(key)))
	}
	ch.arena = append(ch.arena, key...)
	ch.rows = append(ch.rows, store.DueRow{Key: ch.arena[len(ch.arena)-len(key) : len(ch.arena) : len(ch.arena)], Row: *r})
	if len(ch.rows) == c.size {
		return c.flush()
	}
	return nil
}

// flush sends the current chunk, if it holds rows, and takes the other one back once fn is
// done with it.
func (c *chunkPipe) flush() error {
	if c.cur == nil || len(c.cur.rows) == 0 {
		return nil
	}
	c.full <- c.cur
	select {
	case c.cur = <-c.free:
		return c.cur.err
	case <-c.done: // fn panicked; stop re-raises it
		c.cur = nil
		return errConsumerGone
	}
}

var errConsumerGone = errors.New("store: due-chunk consumer exited")

// close ends the pipe and waits for the consumer to exit. It may be called more than once.
func (c *chunkPipe) close() {
	if !c.closed {
		close(c.full)
		c.closed = true
	}
	<-c.done
}

// stop closes the pipe and re-raises a panic from fn on this goroutine. It returns fn's first
// error.
func (c *chunkPipe) stop() error {
	c.close()
	if c.panicked != nil {
		panic(c.panicked)
	}
	return c.firstErr
}

// Stats returns what the pass has observed so far.
func (p *badgerPass) Stats() store.PassStats { return p.stats }

// AdvanceFloor moves the floor up to min(firstDue, now, earliest write in flight at or
// committed after the snapshot) − guardMs, by compare-and-swap from the floor the pass
// observed, and returns the floor as it then stands and whether this call moved it. It does
// nothing if the pass has not iterated, stopped before observing any row, or was closed, or
// if the bound is not above the observed floor, or if the CAS loses (a write lowered the floor
// meanwhile: the next pass will try again).
func (p *badgerPass) AdvanceFloor(guardMs int64) (floorMs int64, advanced bool) {
	if guardMs < 0 {
		return p.s.floor.Load(), false
	}
	return p.s.advance(p, guardMs)
}

// Close releases the pass's snapshot. It is safe to call twice.
func (p *badgerPass) Close() {
	if p.s.unregisterPass(p) {
		for _, it := range p.classIts {
			it.Close()
		}
		p.txn.Discard()
	}
}
