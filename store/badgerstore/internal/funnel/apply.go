package funnel

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/internal/invariants"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// row as o leaves it.
func (f *Funnel) apply(txn *badger.Txn, o *op, cur map[string]rowState) (staged bool, err error) {
	old, had, fromDB, err := f.lookup(txn, o, cur)
	if err != nil {
		return false, err
	}
	if o.kind == opModify {
		return f.applyModify(txn, o, cur, old, had, fromDB)
	}
	return f.stage(txn, o, cur, old, had, fromDB)
}

// applyModify reads o's target as the transaction sees it, lets the Change decide, and stages
// the put it returns over the row lookup found. It runs again, with a fresh read, whenever
// the transaction is rebuilt, so a decision never rests on a write that did not commit.
func (f *Funnel) applyModify(txn *badger.Txn, o *op, cur map[string]rowState, old store.Row, had, fromDB bool) (bool, error) {
	tgt, hasTgt, err := f.lookupTarget(txn, o.key, cur)
	if err != nil {
		return false, err
	}
	w, ok, err := o.decide(store.Current{Row: old, HasRow: had, Target: tgt, HasTarget: hasTgt})
	if err != nil || !ok {
		return false, err
	}
	put, err := f.prepareModified(o, &w)
	if err != nil {
		return false, err
	}
	staged, err := f.stage(txn, &put, cur, old, had, fromDB)
	o.applied = put.applied
	return staged, err
}

// prepareModified checks the Write a Change decided and prepares it as a put of o's key.
func (f *Funnel) prepareModified(o *op, w *store.Write) (op, error) {
	var put op
	if err := put.preparePut(w); err != nil {
		return put, err
	}
	if err := checkModified(o.key, o.minDue, put.key, put.row.DueAtMs); err != nil {
		return put, err
	}
	return put, f.checkDue(&put)
}

// stage stages the write o over the row it replaces (old, had). fromDB says that row was read
// from Badger, for the invariant check.
func (f *Funnel) stage(txn *badger.Txn, o *op, cur map[string]rowState, old store.Row, had, fromDB bool) (staged bool, err error) {
	f.DropHint(o.key) // RH1: before the write, whether or not it commits
	if invariants.Enabled && had && fromDB {
		// A row read from Badger has its index entry in the same snapshot.
		k := keyspace.Due(old.DueAtMs, o.key)
		if c := f.cfg.Classifier; c != nil {
			k = keyspace.Class(c.Class(o.key, old.Projection), old.DueAtMs, o.key)
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
			k := keyspace.Due(old.DueAtMs, o.key)
			if c := f.cfg.Classifier; c != nil {
				k = keyspace.Class(c.Class(o.key, old.Projection), old.DueAtMs, o.key)
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
	rowVal, projVal := RowValues(row)

	if err := f.stageIndex(txn, o, old, had, row, projVal, stage); err != nil {
		return staged, err
	}
	if !had {
		// K1: the row is new. A row that exists is in the filter already, and adding a key
		// the filter holds changes nothing, so only creations pay for it.
		f.keys.Add(o.key)
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
		if prev, ok := f.known(o.key, cur); ok {
			next.target, next.targetKnown = prev.target, prev.targetKnown
		}
	}
	cur[string(o.key)] = next
	o.applied = true
	return staged, nil
}

// stageIndex stages the index entry of row, the put o makes over old (had), and the deletion of
// the entry it replaces: d/ in a store without a classifier, c/ in one with. Every Set and
// Delete goes through stage.
func (f *Funnel) stageIndex(txn *badger.Txn, o *op, old store.Row, had bool, row store.Row, projVal []byte, stage func(error) error) error {
	if c := f.cfg.Classifier; c == nil {
		if had && old.DueAtMs != row.DueAtMs {
			if err := stage(txn.Delete(keyspace.Due(old.DueAtMs, o.key))); err != nil {
				return err
			}
		}
		if err := stage(txn.Set(keyspace.Due(row.DueAtMs, o.key), projVal)); err != nil {
			return err
		}
	} else {
		// The due index under classes (badgerstore's classindex.go): the old entry goes when the row's due
		// time or class changes, and the new one is written.
		class := c.Class(o.key, row.Projection)
		if had {
			if was := c.Class(o.key, old.Projection); was != class || old.DueAtMs != row.DueAtMs {
				if err := stage(txn.Delete(keyspace.Class(was, old.DueAtMs, o.key))); err != nil {
					return err
				}
			}
		}
		if err := stage(txn.Set(keyspace.Class(class, row.DueAtMs, o.key), projVal)); err != nil {
			return err
		}
		if low, ok := f.pl.classLows[class]; !ok || row.DueAtMs < low {
			f.pl.classLows[class] = row.DueAtMs
		}
	}
	return nil
}

// known returns the state of key as this transaction (cur) or the one still being written
// (the overlay) left it.
func (f *Funnel) known(key []byte, cur map[string]rowState) (rowState, bool) {
	if st, ok := cur[string(key)]; ok {
		return st, true
	}
	st, ok := f.pl.overlay[string(key)]
	return st, ok
}

// lookupTarget returns key's target as the transaction sees it: from its own writes, from the
// transaction still being written, or from Badger.
func (f *Funnel) lookupTarget(txn *badger.Txn, key []byte, cur map[string]rowState) (store.Target, bool, error) {
	var t store.Target
	if st, ok := f.known(key, cur); ok && st.targetKnown {
		if st.target == nil {
			return t, false, nil
		}
		return t, true, t.UnmarshalBinary(st.target)
	}
	item, err := txn.Get(keyspace.Target(key))
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

// RowValues encodes row as its s/ value and its d/ entry's projection, in one allocation
// sized for the longest encodings (either version may be written: codec_row.go).
func RowValues(row store.Row) (rowVal, projVal []byte) {
	vals := make([]byte, 0, store.RowLen+store.ProjectionLen)
	vals, _ = row.AppendBinary(vals) // validated by NewSchedule and the target's Validate
	n := len(vals)
	vals, _ = row.Projection.AppendBinary(vals)
	return vals[:n:n], vals[n:]
}

// lookup returns the row o replaces and whether it exists. fromDB reports that Badger was
// read: it is false when the answer came from this transaction's or the previous one's writes,
// or from the key filter showing that the row cannot exist.
func (f *Funnel) lookup(txn *badger.Txn, o *op, cur map[string]rowState) (old store.Row, had, fromDB bool, err error) {
	if st, ok := cur[string(o.key)]; ok {
		return st.row, st.exists, false, nil
	}
	if st, ok := f.pl.overlay[string(o.key)]; ok {
		return st.row, st.exists, false, nil
	}
	// Only a result uses a row hint (hints.go); any other write drops the key's hint when staged.
	if o.kind == opModify {
		if hinted, ok := f.takeHint(o.key); ok {
			if invariants.Enabled {
				checkHint(txn, o, hinted)
			}
			f.hintsUsed.Add(1)
			return hinted, true, false, nil
		}
	}
	if !f.keys.MayHave(o.key) {
		if invariants.Enabled {
			if _, err := txn.Get(o.sKey); !errors.Is(err, badger.ErrKeyNotFound) {
				panic(fmt.Sprintf("store: invariant K1: key filter excludes %q, whose read returned %v", o.key, err))
			}
		}
		f.readsSkipped.Add(1)
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
