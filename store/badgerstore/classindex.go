package badgerstore

import (
	"errors"
	"fmt"
	"math"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/internal/invariants"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/dueorder"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// The class index (docs/store-format.md). A store opened with a Classifier keeps its due index
// under classes, instead of under d/:
//
//	c/ + class (4 B, BE) + dueAt (8 B, BE) + cacheKey → projection
//
// so that a sweep can read each class in due order and stop as soon as the class has nothing
// left that could enter the set it publishes (package sweep). The funnel writes the entry with
// the row, in the same transaction, exactly as it writes d/ in a store without a classifier:
// the index holds every row's (dueAt, cacheKey, projection) once, under the class the store's
// classifier gives it. The rows in plain due order are the merge of the classes
// (package dueorder).
//
// A row's class depends on the configuration its classifier was built from. The classifier's
// fingerprint is stored under m/class: Open rebuilds the index when it differs, and rebuilds d/
// and drops the class index (and the fingerprint) when the store is opened without a
// classifier, so an index is never read that a write made without it left behind
// (openClassIndex).

// DecodeClassKey splits a class-index key (prefix included) into its class, due time and
// cacheKey. cacheKey aliases k. A key that is not one is an error wrapping store.ErrCorruption.
func DecodeClassKey(k []byte) (class uint32, dueAtMs int64, cacheKey []byte, err error) {
	return keyspace.DecodeClass(k)
}

var _ store.ClassPass = (*badgerPass)(nil)

// ClassFingerprint implements store.ClassPass.
func (p *badgerPass) ClassFingerprint() (uint64, bool) {
	if c := p.s.opts.Classifier; c != nil {
		return c.Fingerprint(), true
	}
	return 0, false
}

// StoredHosts implements store.HostLister (package keyfilter: H1). Asked after the snapshot was
// taken, it holds the host of every row the snapshot holds.
func (p *badgerPass) StoredHosts() ([]string, bool) { return p.s.keys.Hosts() }

// ReadHead implements store.ClassPass.
func (p *badgerPass) ReadHead() (store.DueRow, bool, error) {
	var first store.DueRow
	var ok bool
	err := p.IterateDue(1, 1, func(rows []store.DueRow) error {
		first, ok = rows[0], true
		first.Key = append([]byte(nil), rows[0].Key...)
		return nil
	})
	if err != nil {
		return first, false, err
	}
	if p.stats.Capped { // a second row was due: the next due time is past it
		st, err := p.s.walkDue(p.txn, p.bounds, dueorder.Cursor{Ms: p.stats.NowMs + 1}, math.MaxInt64, 0, func([]byte, *store.Row) error { return errStopWalk })
		if err != nil && !errors.Is(err, errStopWalk) {
			return first, false, fmt.Errorf("store: next due after %d: %w", p.stats.NowMs, err)
		}
		if st.HasFirstDue {
			p.stats.NextDueMs, p.stats.HasNextDue = st.FirstDue, true
		}
		p.stats.Capped = false
	}
	return first, ok, nil
}

var errStopWalk = errors.New("store: walk stopped")

// classIter returns the pass's iterator over class (newClassIterator), opened on first use.
func (p *badgerPass) classIter(class uint32) *badger.Iterator {
	it, ok := p.classIts[class]
	if !ok {
		if p.classIts == nil {
			p.classIts = make(map[uint32]*badger.Iterator)
		}
		it = dueorder.NewClassIterator(p.txn, class)
		p.classIts[class] = it
	}
	return it
}

// ClassHeads implements store.ClassPass: one seek per class the bounds name, each from the
// class's bound when it lies above the floor. By B1 no row of the snapshot lies below its
// class's bound, and a class with no bound has no row; below the bound lie the tombstones of
// the rows that left the class since the floor was last raised past them, which a seek from
// the floor would step over one by one: the floor is the least of every class's head, so a
// class that moves faster than the slowest one keeps them between the two.
func (p *badgerPass) ClassHeads() ([]store.ClassHead, error) {
	if p.isClosed() {
		return nil, store.ErrClosed
	}
	if p.s.opts.Classifier == nil {
		return nil, fmt.Errorf("%w: the store keeps no class index", store.ErrInvalidArgument)
	}
	var heads []store.ClassHead
	all := make(map[uint32]int64, len(p.bounds))
	for _, b := range p.bounds { // in class order
		it := p.classIter(b.Class)
		it.Seek(keyspace.Class(b.Class, max(p.stats.FloorMs, b.BoundMs), nil))
		if !it.Valid() {
			continue
		}
		item := it.Item()
		class, due, key, err := keyspace.DecodeClass(item.Key())
		if err != nil {
			return heads, err
		}
		all[class] = due
		if due <= p.stats.NowMs {
			h := store.ClassHead{Class: class, DueRow: store.DueRow{Key: append([]byte(nil), key...)}}
			if err := item.Value(h.Projection.UnmarshalBinary); err != nil {
				return heads, fmt.Errorf("store: class entry %q: %w", key, err)
			}
			h.DueAtMs = due
			heads = append(heads, h)
		}
	}
	if invariants.Enabled {
		p.checkHeads(all)
	}
	p.heads = all
	return heads, nil
}

// checkHeads panics unless heads holds every class's first row from the floor in the pass's
// snapshot, as read without the bounds (dueorder.ClassHeadsAt).
func (p *badgerPass) checkHeads(heads map[uint32]int64) {
	want, err := dueorder.ClassHeadsAt(p.txn, p.stats.FloorMs)
	if err != nil {
		panic(fmt.Sprintf("store: invariant: %v", err))
	}
	for class, due := range want {
		if got, ok := heads[class]; !ok || got != due {
			panic(fmt.Sprintf("store: invariant B1: class %d's head from the floor %d is %d, the bounded read found %d (%v)", class, p.stats.FloorMs, due, got, ok))
		}
	}
	if len(heads) != len(want) {
		panic(fmt.Sprintf("store: invariant B1: the bounded read found %d class heads, the index holds %d", len(heads), len(want)))
	}
}

// ReadClass implements store.ClassPass.
func (p *badgerPass) ReadClass(class uint32, afterMs int64, afterKey []byte, n int, dst []store.DueRow) ([]store.DueRow, bool, error) {
	if p.isClosed() {
		return dst, false, store.ErrClosed
	}
	if p.s.opts.Classifier == nil || n <= 0 {
		return dst, false, fmt.Errorf("%w: class index %v, n %d", store.ErrInvalidArgument, p.s.opts.Classifier != nil, n)
	}
	it := p.classIter(class)
	read := 0
	for it.Seek(append(keyspace.Class(class, afterMs, afterKey), 0)); it.Valid(); it.Next() {
		item := it.Item()
		c, due, key, err := keyspace.DecodeClass(item.Key())
		if err != nil {
			return dst, false, err
		}
		if c != class || due > p.stats.NowMs {
			return dst, false, nil
		}
		if read == n {
			return dst, true, nil
		}
		r := store.DueRow{Key: append([]byte(nil), key...)}
		if err := item.Value(r.Projection.UnmarshalBinary); err != nil {
			return dst, false, fmt.Errorf("store: class entry %q: %w", key, err)
		}
		r.DueAtMs = due
		dst = append(dst, r)
		read++
	}
	return dst, false, nil
}
