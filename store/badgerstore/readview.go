package badgerstore

import (
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
)

// The read view: what the Get methods read.
//
// A Badger read transaction takes its timestamp only after every transaction already given a
// commit timestamp has been written to the value log and the memtables (the oracle's
// watermark). A read opened while a commit is being written therefore waits for that write,
// and a write stalled behind a memtable flush stalls every read with it: a page served to a
// crawler would wait on a render's result being applied.
//
// So reads never open a transaction. The store keeps one read-only transaction, the view, and
// every Get reads through it. The funnel opens a fresh view when a transaction of its own
// completes, before anyone is told (txnDone acknowledges later): commits are sequential, so
// no other commit is in flight and opening it waits on nothing, and a caller whose write was
// acknowledged reads it back. A read holds a reference to the view it uses; a replaced view is
// discarded by the last reader to let go of it. Readers take no lock: publishing is serialised
// by viewMu, which only publishers take, so views only move forward.
//
// Badger marks a commit done before it runs the completion that publishes the view, so for a
// moment a snapshot opened elsewhere (a sweep pass, a scan) can see a commit the view does not
// yet. Every such snapshot of the store's own catches the view up to itself when it opens
// (catchUpView): a read that starts after a pass began never sees less than that pass, which
// the floor protocol's checker relies on (a row read back older than the pass that moved the
// floor over it would look stranded).
//
// One exception: while a value-log GC runs (RunGC, every few minutes at most), a rewrite
// deletes a value-log file that the view, older than the rewrite, still points into, so the
// Get methods then open a transaction of their own, as Badger's readers do, and may wait on a
// commit. RunGC publishes a fresh view when it ends.
type readView struct {
	txn    *badger.Txn
	readTs uint64 // txn's
	// refs is the readers using txn, plus one while it is the store's current view. At zero
	// the transaction is discarded and the view cannot be acquired again.
	refs atomic.Int64
}

// acquire takes a reference unless the view has been let go of entirely.
func (v *readView) acquire() bool {
	for {
		n := v.refs.Load()
		if n == 0 {
			return false
		}
		if v.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (v *readView) release() {
	if v.refs.Add(-1) == 0 {
		v.txn.Discard()
	}
}

// publishView replaces the current view with one that sees every commit completed so far. The
// funnel calls it from a transaction's completion, before the next is submitted; Open calls it
// once before the funnel starts.
func (s *Store) publishView() {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	s.publishLocked()
}

// catchUpView publishes a fresh view unless the current one already sees readTs, the read
// timestamp of a snapshot just opened (which waited for every commit before it).
func (s *Store) catchUpView(readTs uint64) {
	if v := s.view.Load(); v != nil && v.readTs >= readTs {
		return
	}
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if v := s.view.Load(); v != nil && v.readTs >= readTs {
		return
	}
	s.publishLocked()
}

func (s *Store) publishLocked() {
	if s.viewClosed {
		return
	}
	txn := s.db.NewTransaction(false)
	v := &readView{txn: txn, readTs: txn.ReadTs()}
	v.refs.Store(1)
	if old := s.view.Swap(v); old != nil {
		old.release()
	}
}

// closeView lets go of the current view for good: later reads get ErrClosed.
func (s *Store) closeView() {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	s.viewClosed = true
	if old := s.view.Swap(nil); old != nil {
		old.release()
	}
}

// acquireView returns the current view with a reference the caller releases, or nil once the
// store is closed.
func (s *Store) acquireView() *readView {
	for {
		v := s.view.Load()
		if v == nil || v.acquire() {
			return v
		}
		// Replaced and discarded between the load and the acquire: the next load is newer.
	}
}
