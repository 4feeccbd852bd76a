package badgerstore

import (
	"cmp"
	"math"
	"slices"

	"github.com/freshq/freshq/store/badgerstore/internal/dueorder"
	"github.com/freshq/freshq/store/badgerstore/internal/funnel"
)

// This file is the floor protocol (invariant F1: nothing strands; docs/ARCHITECTURE.md, Invariants), made exact by
// worker 0 being the only writer. It is the one critical section (Store.floorMu) shared by
// the funnel and sweep passes:
//
//	funnel batch                          sweep pass
//	────────────                          ──────────
//	lock                                  lock
//	  register in flight (minDue)           snapshot := Badger read txn
//	  every open pass: pass.min ∧= minDue   observed := floor.Load()
//	  floor.Lower(minDue)                   observedHead := head.Load()
//	  head.Lower(minDue)                    pass.min := min minDue of batches in flight
//	unlock                                  register pass
//	commit (Badger, pipelined)            unlock
//	lock                                  iterate the due index from observed to now over snapshot,
//	  unregister                            noting firstDue (the first due row read)
//	unlock                                lock
//	acknowledge callers                     bound := min(firstDue, now, pass.min)
//	                                        head.Advance(observedHead → bound)
//	                                        to := bound − guard
//	                                        floor.Advance(observed → to) if to > observed
//	                                      unlock
//
// Why an advance never strands a row. Take any schedule row R with due time d that exists
// when the advance's CAS succeeds. Either R's batch committed before the pass's critical
// section, or not.
//
//   - Committed before: the batch unregistered before the pass locked, so its commit is in the
//     snapshot. If d ≥ observed, the pass read R (d ≤ now, so firstDue ≤ d) or d > now;
//     either way to ≤ d − guard. If d < observed: when R's batch lowered the floor it became ≤ d, so
//     for the floor to read observed > d later, an advance raised it past d — which, by
//     induction on advances, this argument forbids. So d ≥ observed.
//   - Not committed before: the batch was in flight at the pass's critical section (counted
//     in pass.min when the pass registered), or registered after it (counted in pass.min by
//     the batch itself, since the pass is registered until it closes). Either way
//     pass.min ≤ d, so to ≤ d − guard.
//
// So after the advance every existing row has d ≥ floor. A write made after the advance lowers the floor itself before it commits. A CAS
// from observed fails if any batch lowered the floor in between, and a lost CAS is harmless:
// the next pass tries again. The proof needs no timing assumption; the conformance suite's
// FloorInterleaving (store/storetest) checks it over thousands of random interleavings, and
// its NaiveFloorStrands tests show that dropping the in-flight term and the CAS from the
// observed floor (store.Mutations.NaiveAdvance, in test builds only) strands rows under the
// same checker.
//
// A pass that stopped before it read any row (an error, or a callback refusing the first
// chunk) has no firstDue and refuses to advance; a pass capped by maxRows still has the true
// minimum, because the index is ascending.
//
// Leased rows need nothing here: a row being rendered keeps its index entry at its old due
// time until its result is written through the funnel, so the floor cannot pass it.

// beginInflight registers a funnel batch, whose earliest new due time is minDue
// (math.MaxInt64 for a batch of deletes), and lowers the floor to it. It runs before the
// batch's first transaction commits. Two batches can be in flight at once (the committer
// builds one while Badger writes the other).
func (s *Store) beginInflight(b *funnel.Batch, minDue int64) {
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	s.inflight[b] = minDue
	if minDue == math.MaxInt64 {
		return
	}
	for p := range s.passes {
		p.minWritten = min(p.minWritten, minDue)
	}
	s.floor.Lower(minDue)
	s.head.Lower(minDue)
}

// endInflight unregisters the batch once all its transactions are done.
func (s *Store) endInflight(b *funnel.Batch) {
	s.floorMu.Lock()
	delete(s.inflight, b)
	s.floorMu.Unlock()
}

// setHead stores ms in the head by plain store. MemFloor has no plain store, on purpose; only
// Open (before anything else runs) and the test's naive advance (under floorMu, where every
// other change of the head happens) set it so.
func (s *Store) setHead(ms int64) {
	if cur := s.head.Load(); ms > cur {
		s.head.Advance(cur, ms)
	} else {
		s.head.Lower(ms)
	}
}

// registerPass opens p's snapshot and reads the floor inside the critical section.
func (s *Store) registerPass(p *badgerPass) {
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	p.txn = s.db.NewTransaction(false)
	p.stats.FloorMs = s.floor.Load()
	p.headMs = s.head.Load()
	p.minWritten = math.MaxInt64
	for _, d := range s.inflight {
		p.minWritten = min(p.minWritten, d)
	}
	if s.opts.Classifier != nil {
		p.bounds = s.classBoundsLocked()
	}
	s.passes[p] = struct{}{}
}

// advance is AdvanceFloor's critical section. The head advances by the same rule with no
// guard, from the head the pass observed: the argument above holds for it word for word with
// guard 0, because the pass read every row from the floor (≤ the head, or the head is moot)
// up to now.
func (s *Store) advance(p *badgerPass, guardMs int64) (int64, bool) {
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	s.raiseClassBounds(p)
	if p.closed || !p.iterated || (!p.stats.HasFirstDue && !p.stats.Complete) {
		return s.floor.Load(), false
	}
	bound := p.stats.NowMs
	if p.stats.HasFirstDue {
		bound = min(bound, p.stats.FirstDueMs)
	}
	if s.opts.TestSignals.Mutations.AdvancesNaively() {
		cur := s.floor.Load()
		if to := bound - guardMs; to > cur && s.floor.Advance(cur, to) {
			return to, true
		}
		return s.floor.Load(), false
	}
	bound = min(bound, p.minWritten)
	s.head.Advance(p.headMs, bound)
	to := bound - guardMs
	if to <= p.stats.FloorMs || !s.floor.Advance(p.stats.FloorMs, to) {
		return s.floor.Load(), false
	}
	return to, true
}

// unregisterPass marks p closed and removes it from the critical section's set. It reports
// whether p was open.
func (s *Store) unregisterPass(p *badgerPass) bool {
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	if p.closed {
		return false
	}
	p.closed = true
	delete(s.passes, p)
	return true
}

func (p *badgerPass) isClosed() bool {
	p.s.floorMu.Lock()
	defer p.s.floorMu.Unlock()
	return p.closed
}

// Class bounds (B1). In a store with a classifier, classLow holds for every class that has a
// row a due time no later than any of the class's rows: the merge of the classes
// (package dueorder) leaves a class unread while its bound lies past the rows it needs. A class
// with no entry has no row.
//
// The bounds move like the floor, class by class:
//
//   - Down, by the funnel: before a transaction commits, each class it files a row under is
//     lowered to the earliest due time it files there (lowerClassBounds). So a committed row is
//     never below its class's bound when it appears.
//   - Up, by a pass that read every class's head (store.ClassPass.ClassHeads, from the floor
//     up): in AdvanceFloor's critical section each class's bound rises to at most
//     min(the class's first row in the snapshot, pass.min), the same pass.min as the floor's.
//     The argument of the floor holds for each class: a row committed before the snapshot is
//     in it, so no earlier than the class's first row there (rows below the floor there are
//     none, by F1); a row committed after was in a batch in flight at the pass's critical
//     section or registered after it, so it is no earlier than pass.min. A class with no row
//     in the snapshot rises to pass.min, and is forgotten when that is no write at all.
//
// A walk copies the bounds after it has opened its snapshot. Every row of the snapshot was
// committed before, so it had lowered its class's bound, and any rise since stayed at or below
// it: the copy bounds the snapshot. A walk opens a class at its bound, past the tombstones of
// the rows moved out of it. A broken bound would hide rows from the floor's head: the F1
// checker of the conformance suite finds them stranded (TestConformanceClassIndex's
// FloorInterleaving, when the raise leaves out pass.min), and the tests of this package
// check B1 itself, after every pass against concurrent writers and at the one interleaving
// that needs the in-flight term.

// lowerClassBounds lowers each class of lows to its due time. The funnel calls it before the
// transaction that files those rows commits.
func (s *Store) lowerClassBounds(lows map[uint32]int64) {
	if len(lows) == 0 {
		return
	}
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	for c, d := range lows {
		if cur, ok := s.classLow[c]; !ok || d < cur {
			s.classLow[c] = d
		}
	}
}

// classBounds returns a copy of the class bounds, for a walk whose snapshot is already open.
func (s *Store) classBounds() []dueorder.Bound {
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	return s.classBoundsLocked()
}

func (s *Store) classBoundsLocked() []dueorder.Bound {
	out := make([]dueorder.Bound, 0, len(s.classLow))
	for c, d := range s.classLow {
		out = append(out, dueorder.Bound{Class: c, BoundMs: d})
	}
	slices.SortFunc(out, func(a, b dueorder.Bound) int { return cmp.Compare(a.Class, b.Class) })
	return out
}

// raiseClassBounds is the rise of the bounds in AdvanceFloor's critical section (floorMu held),
// for a pass that read every class's head.
func (s *Store) raiseClassBounds(p *badgerPass) {
	if p.closed || p.heads == nil || s.opts.TestSignals.Mutations.AdvancesNaively() {
		return
	}
	for c, cur := range s.classLow {
		to := p.minWritten
		if h, ok := p.heads[c]; ok {
			to = min(to, h)
		}
		switch {
		case to == math.MaxInt64:
			delete(s.classLow, c)
		case to > cur:
			s.classLow[c] = to
		}
	}
}
