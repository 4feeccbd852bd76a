package sweep

import (
	"container/heap"
	"context"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// The class merge (class.go): how a sweep reads only what it could publish.
//
// Every class with a due row has a cursor at its first unread row. The cursors are kept in a
// heap by their bound: the best score any unread row of the class can have, which is the score
// of the cursor's row with the bucket's lowest cadence, since the rows of a class are read in
// due order and lateness only falls along it. The sweep takes the cursor with the best bound;
// if the selector would not admit that bound into the class's lane, no unread row of that
// class can enter the set, now or later in the pass (a selector's bar only rises), and the
// class is done. Otherwise its row is scored exactly and offered, as the full pass offers
// every row, and the cursor moves on. The pass ends when no cursor is left.
//
// So every row the full pass would have kept is read (its score is at most its class's bound
// when its turn comes, and the bound is admitted), and the set is the same, up to the order of
// offers among rows of equal score and due time, which the selector breaks by offer order.
// Rows scored past the last one kept: the rows within the bucket width of a class's cut-off;
// fetched past them, at most one chunk per class. In ModeLanes the selector's lane bars admit
// about K rows in all (the best K of the non-urgent lanes, with urgent's cap and the floor
// lanes' shares beside them: policy.Selector), so a sweep reads about K rows plus its overread
// however large the due set; in ModeStrict, a simulator mode, up to K per lane. Rows left
// out for politeness (a paused host's, a capped host's) do not fill the set, so a due set made
// mostly of held-back hosts' rows never raises the bar. There the merge stops once every host
// the store holds rows of is paused or at its cap in the set (hosts.Shaper.Settled, from the
// store's store.HostLister): no row left could enter the set, nor evict one. A store of one
// site capped below the node's slots then reads about the host's cap, not its due set. A store
// whose hosts it cannot list (more than store.MaxListedHosts, or a store that keeps no list),
// or with a host under its cap, is read on until the set fills or the due set ends, as the
// full pass reads it, and sweep_cap bounds it the same way. Rows refused at a cap after the
// stop are not kept for promote: read best first, they rank below the host's entries but
// within a bucket's width, where the two orders may differ anyway.

// Chunks of a class are read growing from firstChunk to maxChunk rows: most classes give a
// few rows to a set, a few give thousands. The last chunk of a class is read past what it
// gives (fetched, never scored), so maxChunk bounds that overread per class.

const (
	firstChunk = 16
	maxChunk   = 256
)

// classCursor is a class's place in the merge.
type classCursor struct {
	class uint32
	info  classInfo
	rows  []store.DueRow // read and not yet taken, from i
	i     int
	more  bool // the store has rows of the class past rows
	chunk int
	bound float64
}

type cursorHeap []*classCursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	if h[i].bound != h[j].bound {
		return h[i].bound > h[j].bound
	}
	a, b := &h[i].rows[h[i].i], &h[j].rows[h[j].i]
	if a.DueAtMs != b.DueAtMs {
		return a.DueAtMs < b.DueAtMs
	}
	return h[i].class < h[j].class
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*classCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// admitter is the part of the selector the merge asks.
type admitter interface {
	Admits(lane policy.Lane, score float64, dueAtMs int64) bool
}

// readClasses runs the class merge over cp, handing each row it reads to consider, and
// returns the pass's stats with Rows the rows it read and Capped set when it stopped at
// maxRows (0 = no cap) with a cursor still open. settled, when not nil, is asked every
// settledEvery rows whether no further row could enter the set (every host the store holds
// rows of is paused or at its cap: hosts.Shaper.Settled); then the merge ends there and
// stopped is true.
func readClasses(ctx context.Context, cp store.ClassPass, boost float64, now int64, maxRows int, sel admitter, settled func() bool, consider func(*store.DueRow)) (st store.PassStats, stopped bool, err error) {
	heads, err := cp.ClassHeads()
	if err != nil {
		return cp.Stats(), false, err
	}
	h := make(cursorHeap, 0, len(heads))
	for _, hd := range heads {
		c := &classCursor{class: hd.Class, info: infoOf(hd.Class), rows: []store.DueRow{hd.DueRow}, more: true, chunk: firstChunk}
		c.bound = c.info.bound(hd.DueAtMs, now, boost)
		h = append(h, c)
	}
	heap.Init(&h)
	read, capped := 0, false
	for h.Len() > 0 {
		c := h[0]
		r := &c.rows[c.i]
		if !sel.Admits(c.info.lane, c.bound, r.DueAtMs) {
			heap.Pop(&h)
			continue
		}
		if maxRows > 0 && read >= maxRows {
			capped = true
			break
		}
		if read%chunkRows == 0 {
			if err := ctx.Err(); err != nil {
				return cp.Stats(), false, err
			}
		}
		if settled != nil && read%settledEvery == 0 && read > 0 && settled() {
			stopped = true
			break
		}
		consider(r)
		read++
		if c.i++; c.i == len(c.rows) {
			if !c.more {
				heap.Pop(&h)
				continue
			}
			lastDue, lastKey := r.DueAtMs, r.Key
			c.rows, c.more, err = cp.ReadClass(c.class, lastDue, lastKey, c.chunk, c.rows[:0])
			if err != nil {
				return cp.Stats(), false, err
			}
			c.i, c.chunk = 0, min(2*c.chunk, maxChunk)
			if len(c.rows) == 0 {
				heap.Pop(&h)
				continue
			}
		}
		c.bound = c.info.bound(c.rows[c.i].DueAtMs, now, boost)
		heap.Fix(&h, 0)
	}
	st = cp.Stats()
	st.Rows, st.Capped = read, capped
	return st, stopped, nil
}

// settledEvery is how often, in rows read, the merge asks whether the set is settled: the
// question costs a look at each listed host (at most store.MaxListedHosts).
const settledEvery = 64

// classPass returns pass as a class pass when the sweep can read it by class: the ready set
// is on, the mode ranks by score, and the store's class index was built for this policy's
// classes. Otherwise the sweep reads the whole due set.
func (s *Sweeper) classPass(pass Pass, pol *policy.Policy, enabled bool) (store.ClassPass, bool) {
	if !enabled || s.fullPass || s.opts.Mode == policy.ModeEDF {
		return nil, false
	}
	cp, ok := pass.(store.ClassPass)
	if !ok {
		return nil, false
	}
	fp, ok := cp.ClassFingerprint()
	if !ok {
		return nil, false
	}
	if want := s.fingerprint(pol); fp != want {
		if s.staleIndex != fp {
			s.staleIndex = fp
			s.opts.Log.Warn().Uint64("index", fp).Uint64("policy", want).
				Msg("the class index was built for another configuration (routes or default interval changed): the sweep reads the whole due set until worker 0 restarts")
		}
		return nil, false
	}
	return cp, true
}

// fingerprint is the class fingerprint of pol, computed once per policy.
func (s *Sweeper) fingerprint(pol *policy.Policy) uint64 {
	if s.fpOf != pol {
		s.fpOf, s.fp = pol, fingerprintOf(pol)
	}
	return s.fp
}
