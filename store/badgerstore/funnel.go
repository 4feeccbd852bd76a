package badgerstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/internal/invariants"
	"github.com/freshq/freshq/store"
)

// This file is the funnel: the only code that writes to Badger. It alone writes the s/ and
// d/ prefixes (TestFunnelIsTheOnlyWriter parses the package to prove it), and the class
// index's c/, so the two invariants of the keyspace hold by construction:
//
//   - a schedule row and its due-index entry (d/, or c/ in a store with a classifier) change
//     in one transaction: the old entry (found from the row as the transaction sees it) is
//     deleted and the new one set, so there is never an index entry without its row or a row
//     without its index entry;
//   - every put states submitted and the effective interval (Schedule can only be built by
//     NewSchedule), because a put replaces the record and an omitted field would silently
//     erase a correct value.
//
// Group commit. Callers enqueue requests; one committer goroutine takes the first waiting
// request, gathers whatever else is already queued (up to Options.MaxBatchWrites writes), and
// applies the batch in as few Badger transactions as fit (a transaction holds at most 15 % of a
// memtable; the batch is cut before ErrTxnTooBig, and re-cut if Badger disagrees). Writes apply
// in arrival order, so two writes of one key in one batch end as the later one. Each caller
// is acknowledged only after every transaction holding its writes has committed.
//
// Floor. Before the first transaction of a batch commits, the committer registers the batch
// and lowers the floor to the batch's earliest new due time, inside the critical section it
// shares with sweep passes (protocol.go).

// checkDue applies Options.RefuseImplausibleDue to a prepared put.
func (s *Store) checkDue(o *op) error {
	if s.opts.RefuseImplausibleDue && !store.PlausibleDue(o.row.DueAtMs) {
		return fmt.Errorf("%w: %d ms", store.ErrImplausibleDue, o.row.DueAtMs)
	}
	return nil
}

// WriteSchedule files one schedule through the funnel and returns once it has committed.
func (s *Store) WriteSchedule(sch store.Schedule) error {
	return s.WriteSchedules([]store.Write{{Schedule: sch}})
}

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
func (s *Store) WriteSchedules(ws []store.Write) error {
	if len(ws) == 0 {
		return nil
	}
	ops := make([]op, len(ws))
	for i := range ws {
		if err := ops[i].preparePut(&ws[i]); err != nil {
			return fmt.Errorf("store: write %d of %d: %w", i+1, len(ws), err)
		}
		if err := s.checkDue(&ops[i]); err != nil {
			return fmt.Errorf("store: write %d of %d: %w", i+1, len(ws), err)
		}
	}
	_, err := s.submit(ops)
	return partial(ops, err)
}

// partial turns the error of a failed call into a *PartialWriteError when some of its ops
// committed. The committer is done with ops once submit returns.
func partial(ops []op, err error) error {
	if err == nil {
		return nil
	}
	var committed []bool
	for i := range ops {
		if ops[i].applied {
			if committed == nil {
				committed = make([]bool, len(ops))
			}
			committed[i] = true
		}
	}
	if committed == nil {
		return err
	}
	return &store.PartialWriteError{Committed: committed, Err: err}
}

// DeleteTarget removes every record of cacheKey — schedule row, due-index entry, target and
// page — in one transaction, through the funnel. Deleting a key that has no records is not an
// error.
func (s *Store) DeleteTarget(cacheKey []byte) error {
	if err := store.ValidateKey(cacheKey); err != nil {
		return err
	}
	o := op{kind: opDelete}
	o.setKeys(append([]byte(nil), cacheKey...), true, true)
	_, err := s.submit([]op{o})
	return err
}

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
func (s *Store) Modify(changes []store.Change) ([]bool, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	ops := make([]op, len(changes))
	for i := range changes {
		if err := prepareModify(&ops[i], &changes[i]); err != nil {
			return nil, fmt.Errorf("store: change %d of %d: %w", i+1, len(changes), err)
		}
	}
	_, err := s.submit(ops)
	applied := make([]bool, len(ops))
	for i := range ops {
		applied[i] = ops[i].applied
	}
	return applied, partial(ops, err)
}

func prepareModify(o *op, c *store.Change) error {
	if err := store.ValidateKey(c.Key); err != nil {
		return err
	}
	if c.Decide == nil {
		return fmt.Errorf("%w: a change without Decide", store.ErrInvalidArgument)
	}
	if c.MinDueMs < 0 {
		return store.ErrNegativeDue
	}
	*o = op{kind: opModify, decide: c.Decide, minDue: c.MinDueMs}
	o.setKeys(append([]byte(nil), c.Key...), false, false)
	return nil
}

// checkModified refuses a decided write that is not the Change's key, or due before the
// Change said it could be.
func checkModified(key []byte, minDue int64, got []byte, dueMs int64) error {
	if !bytes.Equal(key, got) {
		return fmt.Errorf("%w: the change of %q decided a write of %q", store.ErrInvalidArgument, key, got)
	}
	if dueMs < minDue {
		return fmt.Errorf("%w: the change of %q decided due %d, before its MinDueMs %d", store.ErrInvalidArgument, key, dueMs, minDue)
	}
	return nil
}

// refileIfAbsent files the schedules of ws only for keys that have no schedule row when the
// funnel applies them, and reports how many it filed. Reconcile uses it so that a row written
// between its scan and its repair is not overwritten. A Write's Target only supplies the
// stored interval; it is not rewritten.
func (s *Store) refileIfAbsent(ws []store.Write) (int, error) {
	ops := make([]op, len(ws))
	for i := range ws {
		w := ws[i]
		t := w.Target
		w.Target = nil
		if err := ops[i].preparePut(&w); err != nil {
			return 0, err
		}
		if err := s.checkDue(&ops[i]); err != nil {
			return 0, err
		}
		ops[i].kind = opPutIfAbsent
		if t != nil {
			ops[i].hasMirror, ops[i].mirror = true, store.MirrorOf(t)
		}
	}
	return s.submit(ops)
}

// RefileIfUnchanged files sch only if cacheKey's schedule row is exactly was when the funnel
// applies the write, and reports whether it filed it. The sweep's unpin hatch uses it: the row
// it files forward is the one a pass read in its snapshot, and a write committed since (the
// row's render result, an operator's change) is newer than that picture and must stand.
func (s *Store) RefileIfUnchanged(sch store.Schedule, was store.Row) (bool, error) {
	var o op
	if err := o.preparePut(&store.Write{Schedule: sch}); err != nil {
		return false, err
	}
	if err := s.checkDue(&o); err != nil {
		return false, err
	}
	o.kind, o.was = opPutIfUnchanged, was
	n, err := s.submit([]op{o})
	return n == 1, err
}

type opKind uint8

const (
	opPut opKind = iota
	opPutIfAbsent
	opPutIfUnchanged // applies only over a row equal to op.was
	opDelete
	opModify // decide turns the key's current row and target into a put (Modify)
)

// op is one prepared funnel write. Keys and encoded values are built by the caller's
// goroutine, so the committer only reads the old row, encodes 44 bytes and calls Badger.
type op struct {
	kind      opKind
	key       []byte // cacheKey
	sKey      []byte
	tKey      []byte
	pKey      []byte
	row       store.Row
	was       store.Row // opPutIfUnchanged: the row it may replace
	hasMirror bool      // mirror overrides what the row carries over (store.Mirror)
	mirror    store.Mirror
	target    []byte // encoded target, or nil
	page      []byte // encoded page, or nil
	dropPage  bool   // delete p/ (puts)
	applied   bool   // set by the committer: staged in a transaction that committed
	failed    bool   // set by the committer: refused, excluded from its transaction
	// opModify: the Change's Decide, and the earliest due time it may return, which the
	// batch registers for the floor protocol before Decide has run.
	decide func(store.Current) (store.Write, bool, error)
	minDue int64
}

// setKeys builds the keys o writes: always the schedule row's, the target's and page's only
// when o writes them (most writes are bare reschedules).
func (o *op) setKeys(cacheKey []byte, target, page bool) {
	o.key = cacheKey
	o.sKey = scheduleKey(cacheKey)
	if target {
		o.tKey = targetKey(cacheKey)
	}
	if page {
		o.pKey = pageKey(cacheKey)
	}
}

func (o *op) preparePut(w *store.Write) error {
	sch := w.Schedule
	if sch.Key() == nil { // the zero Schedule: NewSchedule never makes a nil key
		return store.ErrScheduleUnset
	}
	*o = op{kind: opPut, row: sch.Row()}
	o.setKeys(sch.Key(), w.Target != nil, w.Page != nil || w.DropPage)
	o.dropPage = w.DropPage && w.Page == nil
	if w.Target != nil {
		v, err := w.Target.MarshalBinary()
		if err != nil {
			return err
		}
		o.target, o.hasMirror, o.mirror = v, true, store.MirrorOf(w.Target)
	}
	if w.Page != nil {
		v, err := w.Page.MarshalBinary()
		if err != nil {
			return err
		}
		o.page = v
	}
	return nil
}

// request is one caller's submission, acknowledged on done.
type request struct {
	ops  []op
	err  error // first error of any of its ops or transactions; committer-owned until done
	done chan error
}

// submit enqueues ops as one request and waits for its acknowledgement. It returns how many
// ops were applied (opPutIfAbsent skips existing rows).
func (s *Store) submit(ops []op) (int, error) {
	req := &request{ops: ops, done: make(chan error, 1)}
	s.sendMu.RLock()
	if s.sendClosed {
		s.sendMu.RUnlock()
		return 0, store.ErrClosed
	}
	s.reqs <- req
	s.sendMu.RUnlock()
	err := <-req.done
	n := 0
	for i := range ops {
		if ops[i].applied {
			n++
		}
	}
	return n, err
}

// commitLoop is the committer goroutine. It exits when reqs is closed and drained, after the
// last transaction has completed.
func (s *Store) commitLoop() {
	defer close(s.committerDone)
	var batch []*request
	for req := range s.reqs {
		batch = append(batch[:0], req)
		n := len(req.ops)
	gather:
		for n < s.opts.MaxBatchWrites {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break gather
				}
				batch = append(batch, r)
				n += len(r.ops)
				continue
			default:
			}
			if s.pl.prev == nil {
				break
			}
			// Badger is still writing the previous transaction: whatever arrives
			// meanwhile joins this batch at no cost in latency. This is what makes
			// concurrent callers share a commit (and, with SyncWrites, an fsync).
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break gather
				}
				batch = append(batch, r)
				n += len(r.ops)
			case err := <-s.pl.prev:
				s.pl.prev, s.pl.prevErr, s.pl.collected = nil, err, true
			}
		}
		s.commitBatch(batch)
		clear(batch)
	}
	if s.pl.prev != nil {
		<-s.pl.prev
	}
	if s.pl.spare != nil {
		s.pl.spare.Discard()
	}
}

// pipeline is the committer's double buffer: while Badger writes transaction N, the committer
// gathers and builds N+1. Building N+1 reads rows; N's writes are not yet visible to it, so
// they are kept in overlay, which apply consults before Badger. Before N+1 is submitted the
// committer waits for N: if N failed, N+1 was built on writes that never happened, and is
// rebuilt from Badger alone. Only the committer goroutine touches a pipeline.
type pipeline struct {
	prev      chan error          // completion of the last submitted transaction, nil if none
	prevErr   error               // its outcome, once collected while gathering
	collected bool                // prevErr holds the outcome of the last submitted transaction
	overlay   map[string]rowState // that transaction's final row state per cacheKey
	// spare is a write transaction opened just before the last submission: its snapshot
	// holds everything committed except the last submitted transaction, which overlay holds.
	spare *badger.Txn
	// classLows is, for the transaction being built, the earliest due time it files under
	// each class: what lowerClassBounds lowers before it commits (B1).
	classLows map[uint32]int64
}

// rowState is the schedule row of a key as a transaction leaves it, and its target when the
// transaction wrote or deleted it (targetKnown; target is the encoded value, nil if deleted).
type rowState struct {
	row         store.Row
	exists      bool
	target      []byte
	targetKnown bool
}

// opRef names one op of one request in a batch.
type opRef struct {
	r *request
	o *op
}

// batch is one group-commit batch in flight: registered for the floor protocol until its
// last transaction completes, then acknowledged.
type batch struct {
	mu        sync.Mutex
	reqs      []*request
	remaining int // transactions not yet complete, plus one held while submitting
	minDue    int64
}

func (b *batch) fail(r *request, err error) {
	b.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	b.mu.Unlock()
}

// commitBatch registers a batch, cuts it into transactions by Badger's own size accounting,
// and submits them. The batch is acknowledged by the callback of its last transaction.
func (s *Store) commitBatch(reqs []*request) {
	s.settle()
	b := &batch{reqs: slices.Clone(reqs), remaining: 1, minDue: math.MaxInt64}
	var refs []opRef
	for _, r := range reqs {
		for i := range r.ops {
			o := &r.ops[i]
			refs = append(refs, opRef{r, o})
			switch {
			case o.kind == opModify:
				b.minDue = min(b.minDue, o.minDue)
			case o.kind != opDelete:
				b.minDue = min(b.minDue, o.row.DueAtMs)
			}
		}
	}
	s.beginInflight(b)
	if s.opts.TestSignals.BeforeCommit != nil {
		s.opts.TestSignals.BeforeCommit()
	}
	maxCount, maxSize := s.db.MaxBatchCount()-1, s.db.MaxBatchSize()-1
	start, count, size := 0, int64(0), int64(0)
	for i, ref := range refs {
		c, z := s.opCost(ref.o)
		if i > start && (count+c >= maxCount || size+z >= maxSize) {
			s.submitSegment(b, refs[start:i])
			start, count, size = i, 0, 0
		}
		count += c
		size += z
	}
	s.submitSegment(b, refs[start:])
	s.txnDone(b, nil, nil) // release the submitting hold
}

// settle drops the pipeline's overlay and spare snapshot if the last transaction has already
// completed: an idle committer then starts its next batch from a fresh snapshot rather than one
// taken before the last commit. Under load the last transaction is usually still in flight,
// and the pipeline is kept.
func (s *Store) settle() {
	if s.pl.prev != nil {
		select {
		case err := <-s.pl.prev:
			s.pl.prev, s.pl.prevErr, s.pl.collected = nil, err, true
		default:
			return
		}
	}
	if !s.pl.collected {
		return
	}
	// Complete, committed or failed: a fresh snapshot sees exactly what is durable.
	s.pl.collected, s.pl.prevErr, s.pl.overlay = false, nil, nil
	if s.pl.spare != nil {
		s.pl.spare.Discard()
		s.pl.spare = nil
	}
}

// submitSegment builds refs into one transaction and submits it. A write is never
// half-applied: when one fails after staging part of itself (Badger refusing an entry), the
// transaction is discarded and rebuilt without it; when Badger finds the transaction too big
// after all (its accounting changed under us), it is discarded and the segment split in two.
func (s *Store) submitSegment(b *batch, refs []opRef) {
	if len(refs) == 0 {
		return
	}
	for {
		txn := s.pl.spare
		s.pl.spare = nil
		if txn == nil {
			txn = s.db.NewTransaction(true)
		}
		cur := make(map[string]rowState, len(refs))
		clear(s.pl.classLows)
		rebuild, split := false, false
		for _, ref := range refs {
			if ref.o.failed {
				continue
			}
			staged, err := s.apply(txn, ref.o, cur)
			if err == nil {
				continue
			}
			if errors.Is(err, badger.ErrTxnTooBig) && len(refs) > 1 {
				split = true
				break
			}
			ref.o.failed = true
			b.fail(ref.r, err)
			s.log.Error().Err(err).Msg("funnel write refused")
			if staged {
				rebuild = true
				break
			}
		}
		if split || rebuild {
			txn.Discard()
			resetApplied(refs)
			if split {
				s.submitSegment(b, refs[:len(refs)/2])
				s.submitSegment(b, refs[len(refs)/2:])
				return
			}
			continue
		}
		if s.pl.prev != nil {
			err := <-s.pl.prev
			s.pl.prev = nil
			if err != nil {
				// This transaction read rows through the failed one's overlay.
				txn.Discard()
				resetApplied(refs)
				s.pl.overlay = nil
				continue
			}
		}
		// Open the next build's transaction before this one takes its commit timestamp:
		// its snapshot then lacks exactly this transaction, whose writes become the overlay.
		// (Opened after, it would wait for this commit to finish.)
		s.pl.spare = s.db.NewTransaction(true)
		s.pl.overlay = cur
		s.lowerClassBounds(s.pl.classLows) // B1: before the commit
		done := make(chan error, 1)
		b.mu.Lock()
		b.remaining++
		b.mu.Unlock()
		s.pl.prev = done
		s.rc.begin(func(yield func([]byte)) {
			for _, ref := range refs { // whatever each op ends up writing: all its keys
				yield(scheduleKey(ref.o.key))
				yield(targetKey(ref.o.key))
				yield(pageKey(ref.o.key))
			}
		})
		txn.CommitWith(func(err error) {
			// A fresh read view before the committer may submit the next transaction
			// (opening it then waits on nothing) and before anyone is acknowledged (a caller
			// reads its own writes back). readview.go says why reads never open their own.
			if err == nil {
				s.publishView()
			}
			s.rc.end()
			// Signal the committer before acknowledging, so a caller that has its
			// acknowledgement knows the committer can see the transaction complete.
			done <- err
			s.txnDone(b, refs, err)
		})
		return
	}
}

// txnDone records the completion of one of b's transactions (refs nil for the submitting
// hold) and, with the last, unregisters and acknowledges the batch. It runs on Badger's
// callback goroutines.
func (s *Store) txnDone(b *batch, refs []opRef, err error) {
	b.mu.Lock()
	if err != nil {
		err = fmt.Errorf("store: commit %d writes: %w", len(refs), err)
		for _, ref := range refs {
			ref.o.applied = false
			if ref.r.err == nil {
				ref.r.err = err
			}
		}
	}
	b.remaining--
	last := b.remaining == 0
	b.mu.Unlock()
	if err != nil {
		s.log.Error().Err(err).Msg("funnel commit failed")
	}
	if last {
		s.endInflight(b)
		for _, r := range b.reqs {
			r.done <- r.err
		}
	}
}

func resetApplied(refs []opRef) {
	for _, ref := range refs {
		ref.o.applied = false
	}
}

// opCost is an upper bound of what o adds to Badger's per-transaction accounting
// (Txn.checkSize: per entry, key + value + 2 meta bytes + 10 version bytes, a value at or
// above the threshold counting as a 12-byte pointer).
func (s *Store) opCost(o *op) (count, size int64) {
	th := s.opts.ValueThreshold
	entry := func(k, v int) {
		vl := int64(v)
		if vl >= th {
			vl = 12
		}
		count++
		size += int64(k) + vl + 12
	}
	// The due index: d/ in a store without a classifier, c/ in one with (classmerge.go).
	dueLen := dueKeyHeaderLen + len(o.key)
	if s.opts.Classifier != nil {
		dueLen = classKeyHeaderLen + len(o.key)
	}
	entry(dueLen, 0)                 // delete the old entry
	entry(len(o.sKey), store.RowLen) // the longest encodings: an upper bound whichever version is written
	switch o.kind {
	case opDelete:
		entry(len(o.tKey), 0)
		entry(len(o.pKey), 0)
	default:
		entry(dueLen, store.ProjectionLen)
		if o.target != nil {
			entry(len(o.tKey), len(o.target))
		}
		if o.page != nil {
			entry(len(o.pKey), len(o.page))
		}
		if o.dropPage {
			entry(len(o.pKey), 0)
		}
	}
	return count, size
}

// apply stages o in txn. staged reports whether any entry of o reached the transaction before
// an error, in which case the transaction must be discarded, not committed.
//
// The row it replaces is read, in order, from this transaction's own earlier writes (cur), from
// the transaction still being written (the overlay), or from Badger. cur is updated with the
// row as o leaves it.
func (s *Store) apply(txn *badger.Txn, o *op, cur map[string]rowState) (staged bool, err error) {
	old, had, fromDB, err := s.lookup(txn, o, cur)
	if err != nil {
		return false, err
	}
	if o.kind == opModify {
		return s.applyModify(txn, o, cur, old, had, fromDB)
	}
	return s.stage(txn, o, cur, old, had, fromDB)
}

// applyModify reads o's target as the transaction sees it, lets the Change decide, and stages
// the put it returns over the row lookup found. It runs again, with a fresh read, whenever
// the transaction is rebuilt, so a decision never rests on a write that did not commit.
func (s *Store) applyModify(txn *badger.Txn, o *op, cur map[string]rowState, old store.Row, had, fromDB bool) (bool, error) {
	tgt, hasTgt, err := s.lookupTarget(txn, o.key, cur)
	if err != nil {
		return false, err
	}
	w, ok, err := o.decide(store.Current{Row: old, HasRow: had, Target: tgt, HasTarget: hasTgt})
	if err != nil || !ok {
		return false, err
	}
	put, err := s.prepareModified(o, &w)
	if err != nil {
		return false, err
	}
	staged, err := s.stage(txn, &put, cur, old, had, fromDB)
	o.applied = put.applied
	return staged, err
}

// prepareModified checks the Write a Change decided and prepares it as a put of o's key.
func (s *Store) prepareModified(o *op, w *store.Write) (op, error) {
	var put op
	if err := put.preparePut(w); err != nil {
		return put, err
	}
	if err := checkModified(o.key, o.minDue, put.key, put.row.DueAtMs); err != nil {
		return put, err
	}
	return put, s.checkDue(&put)
}

// stage stages the write o over the row it replaces (old, had). fromDB says that row was read
// from Badger, for the invariant check.
func (s *Store) stage(txn *badger.Txn, o *op, cur map[string]rowState, old store.Row, had, fromDB bool) (staged bool, err error) {
	s.DropHint(o.key) // RH1: before the write, whether or not it commits
	if invariants.Enabled && had && fromDB {
		// A row read from Badger has its index entry in the same snapshot.
		k := dueKey(old.DueAtMs, o.key)
		if c := s.opts.Classifier; c != nil {
			k = classKey(c.Class(o.key, old.Projection), old.DueAtMs, o.key)
		}
		if _, err := txn.Get(k); err != nil {
			panic(fmt.Sprintf("store: invariant: row %q due %d has no index entry: %v", o.key, old.DueAtMs, err))
		}
	}
	// From here on every Set and Delete goes through stage, which records that the
	// transaction now holds part of o.
	stage := func(e error) error {
		if e == nil {
			staged = true
			return nil
		}
		return fmt.Errorf("store: write %q: %w", o.key, e)
	}

	switch o.kind {
	case opDelete:
		if had {
			k := dueKey(old.DueAtMs, o.key)
			if c := s.opts.Classifier; c != nil {
				k = classKey(c.Class(o.key, old.Projection), old.DueAtMs, o.key)
			}
			if err := stage(txn.Delete(k)); err != nil {
				return staged, err
			}
			if err := stage(txn.Delete(o.sKey)); err != nil {
				return staged, err
			}
		}
		if err := stage(txn.Delete(o.tKey)); err != nil {
			return staged, err
		}
		if err := stage(txn.Delete(o.pKey)); err != nil {
			return staged, err
		}
		cur[string(o.key)] = rowState{targetKnown: true}
		o.applied = true
		return staged, nil
	case opPutIfAbsent:
		if had {
			return false, nil
		}
	case opPutIfUnchanged:
		if !had || old != o.was {
			return false, nil
		}
	}

	row := o.row
	switch {
	case o.hasMirror:
		row.SetMirror(o.mirror)
	case had:
		row.SetMirror(old.Mirror())
	}
	rowVal, projVal := rowValues(row)

	if c := s.opts.Classifier; c == nil {
		if had && old.DueAtMs != row.DueAtMs {
			if err := stage(txn.Delete(dueKey(old.DueAtMs, o.key))); err != nil {
				return staged, err
			}
		}
		if err := stage(txn.Set(dueKey(row.DueAtMs, o.key), projVal)); err != nil {
			return staged, err
		}
	} else {
		// The due index under classes (classindex.go): the old entry goes when the row's due
		// time or class changes, and the new one is written.
		class := c.Class(o.key, row.Projection)
		if had {
			if was := c.Class(o.key, old.Projection); was != class || old.DueAtMs != row.DueAtMs {
				if err := stage(txn.Delete(classKey(was, old.DueAtMs, o.key))); err != nil {
					return staged, err
				}
			}
		}
		if err := stage(txn.Set(classKey(class, row.DueAtMs, o.key), projVal)); err != nil {
			return staged, err
		}
		if low, ok := s.pl.classLows[class]; !ok || row.DueAtMs < low {
			s.pl.classLows[class] = row.DueAtMs
		}
	}
	if !had {
		// K1: the row is new. A row that exists is in the filter already, and adding a key
		// the filter holds changes nothing, so only creations pay for it.
		s.keys.add(o.key)
	}
	if err := stage(txn.Set(o.sKey, rowVal)); err != nil {
		return staged, err
	}
	if o.target != nil {
		if err := stage(txn.Set(o.tKey, o.target)); err != nil {
			return staged, err
		}
	}
	if o.page != nil {
		if err := stage(txn.Set(o.pKey, o.page)); err != nil {
			return staged, err
		}
	}
	if o.dropPage {
		if err := stage(txn.Delete(o.pKey)); err != nil {
			return staged, err
		}
	}
	next := rowState{row: row, exists: true, target: o.target, targetKnown: o.target != nil}
	if o.target == nil {
		// The target is unchanged: keep what this or the previous transaction knew of it.
		if prev, ok := s.known(o.key, cur); ok {
			next.target, next.targetKnown = prev.target, prev.targetKnown
		}
	}
	cur[string(o.key)] = next
	o.applied = true
	return staged, nil
}

// known returns the state of key as this transaction (cur) or the one still being written
// (the overlay) left it.
func (s *Store) known(key []byte, cur map[string]rowState) (rowState, bool) {
	if st, ok := cur[string(key)]; ok {
		return st, true
	}
	st, ok := s.pl.overlay[string(key)]
	return st, ok
}

// lookupTarget returns key's target as the transaction sees it: from its own writes, from the
// transaction still being written, or from Badger.
func (s *Store) lookupTarget(txn *badger.Txn, key []byte, cur map[string]rowState) (store.Target, bool, error) {
	var t store.Target
	if st, ok := s.known(key, cur); ok && st.targetKnown {
		if st.target == nil {
			return t, false, nil
		}
		return t, true, t.UnmarshalBinary(st.target)
	}
	item, err := txn.Get(targetKey(key))
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return t, false, nil
	case err != nil:
		return t, false, fmt.Errorf("store: read target %q: %w", key, err)
	}
	if err := item.Value(t.UnmarshalBinary); err != nil {
		return t, false, fmt.Errorf("store: read target %q: %w", key, err)
	}
	return t, true, nil
}

// rowValues encodes row as its s/ value and its d/ entry's projection, in one allocation
// sized for the longest encodings (either version may be written: codec_row.go).
func rowValues(row store.Row) (rowVal, projVal []byte) {
	vals := make([]byte, 0, store.RowLen+store.ProjectionLen)
	vals, _ = row.AppendBinary(vals) // validated by NewSchedule and the target's Validate
	n := len(vals)
	vals, _ = row.Projection.AppendBinary(vals)
	return vals[:n:n], vals[n:]
}

// lookup returns the row o replaces and whether it exists. fromDB reports that Badger was
// read: it is false when the answer came from this transaction's or the previous one's writes,
// or from the key filter showing that the row cannot exist.
func (s *Store) lookup(txn *badger.Txn, o *op, cur map[string]rowState) (old store.Row, had, fromDB bool, err error) {
	if st, ok := cur[string(o.key)]; ok {
		return st.row, st.exists, false, nil
	}
	if st, ok := s.pl.overlay[string(o.key)]; ok {
		return st.row, st.exists, false, nil
	}
	// Only a result uses a row hint (hints.go); any other write drops the key's hint when staged.
	if o.kind == opModify {
		if hinted, ok := s.takeHint(o.key); ok {
			if invariants.Enabled {
				s.checkHint(txn, o, hinted)
			}
			s.hintsUsed.Add(1)
			return hinted, true, false, nil
		}
	}
	if !s.keys.mayHave(o.key) {
		if invariants.Enabled {
			if _, err := txn.Get(o.sKey); !errors.Is(err, badger.ErrKeyNotFound) {
				panic(fmt.Sprintf("store: invariant K1: key filter excludes %q, whose read returned %v", o.key, err))
			}
		}
		s.readsSkipped.Add(1)
		return old, false, false, nil
	}
	item, err := txn.Get(o.sKey)
	switch {
	case err == nil:
		if err := item.Value(old.UnmarshalBinary); err != nil {
			return old, false, true, fmt.Errorf("store: read schedule row %q: %w", o.key, err)
		}
		return old, true, true, nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return old, false, true, nil
	}
	return old, false, true, fmt.Errorf("store: read schedule row %q: %w", o.key, err)
}

// The class index's writes outside a funnel batch (classindex.go): at Open, before the
// committer starts, the index is made to agree with the store's classifier. They live here
// because every write of the store does.

// openClassIndex makes the due index agree with the store's classifier. A store with a
// classifier keeps its due index under classes (c/, with the classifier's fingerprint under
// m/class) and no d/ entries; one without keeps d/ and no class index. Open rebuilds the one
// in force from the schedule rows when it is missing or was built for another classifier, and
// drops the other. It runs in Open, before the funnel starts.
//
// Every step can be cut by a crash, and the next Open finishes the change, because the steps
// keep one rule: m/class absent means d/ is complete. d/ is dropped only after m/class is
// written, and m/class deleted only after d/ is rebuilt.
func (s *Store) openClassIndex() error {
	var stored uint64
	var has bool
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(keyClassPrint))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != classPrintValueLen {
				return corruptionf("class fingerprint: length %d", len(v))
			}
			stored, has = binary.BigEndian.Uint64(v), true
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("store: read class fingerprint: %w", err)
	}
	c := s.opts.Classifier
	switch {
	case c == nil && !has:
		return nil
	case c == nil:
		return s.rebuildDueIndex()
	case !has || stored != c.Fingerprint():
		if err := s.rebuildClassIndex(c); err != nil {
			return err
		}
	}
	return s.dropDueIndex()
}

// dropDueIndex drops what d/ entries a store with a classifier still holds: all of them, the
// first time it is opened with one, and none after that.
func (s *Store) dropDueIndex() error {
	var present bool
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixDue)})
		defer it.Close()
		it.Rewind()
		present = it.Valid()
		return nil
	})
	if err != nil || !present {
		return err
	}
	if err := s.db.DropPrefix([]byte(prefixDue)); err != nil {
		return fmt.Errorf("store: drop due index: %w", err)
	}
	s.log.Info().Msg("due index dropped: the class index orders the rows by due time")
	return nil
}

// rebuildDueIndex writes d/ afresh from the schedule rows for a store opened without a
// classifier that last had one, then deletes the fingerprint and drops the class index.
func (s *Store) rebuildDueIndex() error {
	start := time.Now()
	if err := s.db.DropPrefix([]byte(prefixDue)); err != nil {
		return fmt.Errorf("store: drop due index: %w", err)
	}
	n, err := s.writeIndexFromRows(func(ck []byte, r *store.Row) []byte { return dueKey(r.DueAtMs, ck) })
	if err == nil {
		err = s.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(keyClassPrint)) })
	}
	if err == nil {
		err = s.db.DropPrefix([]byte(prefixClass))
	}
	if err != nil {
		return fmt.Errorf("store: rebuild due index: %w", err)
	}
	s.log.Info().Int("rows", n).Dur("took", time.Since(start)).Msg("due index rebuilt and class index dropped: the store is open without a classifier")
	return nil
}

// rebuildClassIndex writes the class index afresh from the schedule rows, then the
// fingerprint: a crash in between leaves no fingerprint, or the old one, and the next Open
// rebuilds again.
func (s *Store) rebuildClassIndex(c store.Classifier) error {
	start := time.Now()
	if err := s.db.DropPrefix([]byte(prefixClass)); err != nil {
		return fmt.Errorf("store: drop class index: %w", err)
	}
	n, err := s.writeIndexFromRows(func(ck []byte, r *store.Row) []byte {
		return classKey(c.Class(ck, r.Projection), r.DueAtMs, ck)
	})
	if err == nil {
		err = s.db.Update(func(txn *badger.Txn) error {
			return txn.Set([]byte(keyClassPrint), binary.BigEndian.AppendUint64(nil, c.Fingerprint()))
		})
	}
	if err != nil {
		return fmt.Errorf("store: rebuild class index: %w", err)
	}
	s.log.Info().Int("rows", n).Dur("took", time.Since(start)).Msg("class index rebuilt for the classifier in force")
	return nil
}

// writeIndexFromRows writes, for every schedule row, the index entry keyed by indexKey with the
// row's projection, and returns how many it wrote.
func (s *Store) writeIndexFromRows(indexKey func(ck []byte, r *store.Row) []byte) (int, error) {
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixSchedule)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			var r store.Row
			if err := item.Value(r.UnmarshalBinary); err != nil {
				return fmt.Errorf("schedule row %q: %w", item.Key(), err)
			}
			ck := item.Key()[len(prefixSchedule):]
			proj, _ := r.Projection.MarshalBinary()
			if err := wb.Set(indexKey(ck, &r), proj); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	}
	return n, err
}
