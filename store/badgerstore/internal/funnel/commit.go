package funnel

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// commitLoop is the committer goroutine. It exits when reqs is closed and drained, after the
// last transaction has completed.
func (f *Funnel) commitLoop() {
	defer close(f.committerDone)
	var batch []*request
	for req := range f.reqs {
		batch = append(batch[:0], req)
		n := len(req.ops)
	gather:
		for n < f.cfg.MaxBatchWrites {
			select {
			case r, ok := <-f.reqs:
				if !ok {
					break gather
				}
				batch = append(batch, r)
				n += len(r.ops)
				continue
			default:
			}
			if f.pl.prev == nil {
				break
			}
			// Badger is still writing the previous transaction: whatever arrives
			// meanwhile joins this batch at no cost in latency. This is what makes
			// concurrent callers share a commit (and, with SyncWrites, an fsync).
			select {
			case r, ok := <-f.reqs:
				if !ok {
					break gather
				}
				batch = append(batch, r)
				n += len(r.ops)
			case err := <-f.pl.prev:
				f.pl.prev, f.pl.prevErr, f.pl.collected = nil, err, true
			}
		}
		f.commitBatch(batch)
		clear(batch)
	}
	if f.pl.prev != nil {
		<-f.pl.prev
	}
	if f.pl.spare != nil {
		f.pl.spare.Discard()
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

// Batch is one group-commit batch in flight: registered for the floor protocol until its
// last transaction completes, then acknowledged.
type Batch struct {
	mu        sync.Mutex
	reqs      []*request
	remaining int // transactions not yet complete, plus one held while submitting
	minDue    int64
}

func (b *Batch) fail(r *request, err error) {
	b.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	b.mu.Unlock()
}

// commitBatch registers a batch, cuts it into transactions by Badger's own size accounting,
// and submits them. The batch is acknowledged by the callback of its last transaction.
func (f *Funnel) commitBatch(reqs []*request) {
	f.settle()
	b := &Batch{reqs: slices.Clone(reqs), remaining: 1, minDue: math.MaxInt64}
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
	f.proto.BeginBatch(b, b.minDue)
	if f.cfg.Signals.BeforeCommit != nil {
		f.cfg.Signals.BeforeCommit()
	}
	maxCount, maxSize := f.db.MaxBatchCount()-1, f.db.MaxBatchSize()-1
	start, count, size := 0, int64(0), int64(0)
	for i, ref := range refs {
		c, z := f.opCost(ref.o)
		if i > start && (count+c >= maxCount || size+z >= maxSize) {
			f.submitSegment(b, refs[start:i])
			start, count, size = i, 0, 0
		}
		count += c
		size += z
	}
	f.submitSegment(b, refs[start:])
	f.txnDone(b, nil, nil) // release the submitting hold
}

// settle drops the pipeline's overlay and spare snapshot if the last transaction has already
// completed: an idle committer then starts its next batch from a fresh snapshot rather than one
// taken before the last commit. Under load the last transaction is usually still in flight,
// and the pipeline is kept.
func (f *Funnel) settle() {
	if f.pl.prev != nil {
		select {
		case err := <-f.pl.prev:
			f.pl.prev, f.pl.prevErr, f.pl.collected = nil, err, true
		default:
			return
		}
	}
	if !f.pl.collected {
		return
	}
	// Complete, committed or failed: a fresh snapshot sees exactly what is durable.
	f.pl.collected, f.pl.prevErr, f.pl.overlay = false, nil, nil
	if f.pl.spare != nil {
		f.pl.spare.Discard()
		f.pl.spare = nil
	}
}

// submitSegment builds refs into one transaction and submits it. A write is never
// half-applied: when one fails after staging part of itself (Badger refusing an entry), the
// transaction is discarded and rebuilt without it; when Badger finds the transaction too big
// after all (its accounting changed under us), it is discarded and the segment split in two.
func (f *Funnel) submitSegment(b *Batch, refs []opRef) {
	if len(refs) == 0 {
		return
	}
	for {
		txn := f.pl.spare
		f.pl.spare = nil
		if txn == nil {
			txn = f.db.NewTransaction(true)
		}
		cur := make(map[string]rowState, len(refs))
		clear(f.pl.classLows)
		rebuild, split := false, false
		for _, ref := range refs {
			if ref.o.failed {
				continue
			}
			staged, err := f.apply(txn, ref.o, cur)
			if err == nil {
				continue
			}
			if errors.Is(err, badger.ErrTxnTooBig) && len(refs) > 1 {
				split = true
				break
			}
			ref.o.failed = true
			b.fail(ref.r, err)
			f.log.Error().Err(err).Msg("funnel write refused")
			if staged {
				rebuild = true
				break
			}
		}
		if split || rebuild {
			txn.Discard()
			resetApplied(refs)
			if split {
				f.submitSegment(b, refs[:len(refs)/2])
				f.submitSegment(b, refs[len(refs)/2:])
				return
			}
			continue
		}
		if f.pl.prev != nil {
			err := <-f.pl.prev
			f.pl.prev = nil
			if err != nil {
				// This transaction read rows through the failed one's overlay.
				txn.Discard()
				resetApplied(refs)
				f.pl.overlay = nil
				continue
			}
		}
		// Open the next build's transaction before this one takes its commit timestamp:
		// its snapshot then lacks exactly this transaction, whose writes become the overlay.
		// (Opened after, it would wait for this commit to finish.)
		f.pl.spare = f.db.NewTransaction(true)
		f.pl.overlay = cur
		f.proto.LowerClassBounds(f.pl.classLows) // B1: before the commit
		done := make(chan error, 1)
		b.mu.Lock()
		b.remaining++
		b.mu.Unlock()
		f.pl.prev = done
		f.rc.Begin(func(yield func([]byte)) {
			for _, ref := range refs { // whatever each op ends up writing: all its keys
				yield(keyspace.Schedule(ref.o.key))
				yield(keyspace.Target(ref.o.key))
				yield(keyspace.Page(ref.o.key))
			}
		})
		txn.CommitWith(func(err error) {
			// A fresh read view before the committer may submit the next transaction
			// (opening it then waits on nothing) and before anyone is acknowledged (a caller
			// reads its own writes back). badgerstore's readview.go says why reads never open their own.
			if err == nil {
				f.proto.Committed()
			}
			f.rc.End()
			// Signal the committer before acknowledging, so a caller that has its
			// acknowledgement knows the committer can see the transaction complete.
			done <- err
			f.txnDone(b, refs, err)
		})
		return
	}
}

// txnDone records the completion of one of b's transactions (refs nil for the submitting
// hold) and, with the last, unregisters and acknowledges the batch. It runs on Badger's
// callback goroutines.
func (f *Funnel) txnDone(b *Batch, refs []opRef, err error) {
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
		f.log.Error().Err(err).Msg("funnel commit failed")
	}
	if last {
		f.proto.EndBatch(b)
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
func (f *Funnel) opCost(o *op) (count, size int64) {
	th := f.cfg.ValueThreshold
	entry := func(k, v int) {
		vl := int64(v)
		if vl >= th {
			vl = 12
		}
		count++
		size += int64(k) + vl + 12
	}
	// The due index: d/ in a store without a classifier, c/ in one with (package dueorder).
	dueLen := keyspace.DueKeyHeaderLen + len(o.key)
	if f.cfg.Classifier != nil {
		dueLen = keyspace.ClassKeyHeaderLen + len(o.key)
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
