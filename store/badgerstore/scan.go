package badgerstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/dueorder"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// walkDue iterates the due order of txn from the cursor up to and including nowMs, key-only
// (the projection is the index entry's inline value, so no value-log read happens), calling
// visit for each due row in ascending (due, key) order. key is valid only during the call. The
// walk stops after maxRows rows (0 = no cap), at the first row past nowMs (recorded as the next
// not-yet-due time), at the end of the index, or at the first error.
//
// A store with a classifier keeps its due index under classes and walks their merge
// (dueorder.WalkClasses), bounded by bounds, the class bounds copied after txn was opened (B1); one
// without walks the d/ index (dueorder.WalkIndex) and ignores them.
func (s *Store) walkDue(txn *badger.Txn, bounds []dueorder.Bound, from dueorder.Cursor, nowMs int64, maxRows int, visit func(key []byte, r *store.Row) error) (dueorder.Stats, error) {
	if s.opts.Classifier != nil {
		return dueorder.WalkClasses(txn, bounds, from, nowMs, maxRows, visit)
	}
	return dueorder.WalkIndex(txn, from, nowMs, maxRows, visit)
}

// ScanDue is the floored index scan, the claim path's fallback: the due rows from floorMs up
// to nowMs, at most limit of them, in ascending due order, with their projections. It reads a
// consistent snapshot and never touches s/, t/ or p/. It does not move the floor.
func (s *Store) ScanDue(floorMs, nowMs int64, limit int) (store.ScanResult, error) {
	return s.scanDue(dueorder.Cursor{Ms: floorMs}, nowMs, limit)
}

// ScanDueAfter continues a scan strictly after the row (afterMs, afterKey): the due rows
// ordered by (due time, cacheKey) past that cursor, up to nowMs, at most limit of them. Pages
// chained on the last row of the previous page never read a row twice and never skip one,
// however many rows share one due time: a page of rows that all fall on one millisecond does
// not hide the rows behind it. A row moved behind the cursor since the previous page (a
// reschedule to an earlier time) is not revisited; the next scan from the head sees it.
func (s *Store) ScanDueAfter(afterMs int64, afterKey []byte, nowMs int64, limit int) (store.ScanResult, error) {
	if afterMs < 0 {
		return s.ScanDue(0, nowMs, limit)
	}
	return s.scanDue(dueorder.Cursor{Ms: afterMs, Key: afterKey, After: true}, nowMs, limit)
}

func (s *Store) scanDue(from dueorder.Cursor, nowMs int64, limit int) (store.ScanResult, error) {
	var res store.ScanResult
	if limit <= 0 {
		return res, fmt.Errorf("%w: limit %d", store.ErrInvalidArgument, limit)
	}
	if s.closed.Load() {
		return res, store.ErrClosed
	}
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	s.catchUpView(txn.ReadTs())
	var bounds []dueorder.Bound
	if s.opts.Classifier != nil {
		bounds = s.classBounds() // after the snapshot: B1
	}
	var arena []byte
	st, err := s.walkDue(txn, bounds, from, nowMs, limit, func(key []byte, r *store.Row) error {
		if len(arena)+len(key) > cap(arena) {
			// Sized for the rows the limit still allows, at most 4 KiB at a time: a claim's
			// scan of a few rows should not pay for a page of them.
			arena = make([]byte, 0, max(min(4096, (limit-len(res.Rows))*96), 2*len(key)))
		}
		arena = append(arena, key...)
		res.Rows = append(res.Rows, store.DueRow{Key: arena[len(arena)-len(key) : len(arena) : len(arena)], Row: *r})
		return nil
	})
	if err != nil {
		return store.ScanResult{}, fmt.Errorf("store: scan due from %d: %w", from.Ms, err)
	}
	res.FirstDueMs, res.HasFirstDue = st.FirstDue, st.HasFirstDue
	res.NextDueMs, res.HasNextDue = st.NextDue, st.HasNextDue
	res.Capped = st.Capped
	return res, nil
}

// ForEachSchedule calls fn for every schedule row whose cacheKey starts with prefix, in key
// order, from one snapshot (for operator actions on a URL prefix, such as prioritize). key and
// row are valid only during the call. An error from fn stops the walk and is returned.
func (s *Store) ForEachSchedule(prefix []byte, fn func(key []byte, row store.Row) error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	p := keyspace.Schedule(prefix)
	return s.db.View(func(txn *badger.Txn) error {
		s.catchUpView(txn.ReadTs())
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: p})
		defer it.Close()
		var row store.Row
		for it.Seek(p); it.Valid(); it.Next() {
			item := it.Item()
			if err := item.Value(row.UnmarshalBinary); err != nil {
				return fmt.Errorf("store: schedule row %q: %w", item.Key(), err)
			}
			if err := fn(item.Key()[len(p)-len(prefix):], row); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListSchedule implements store.Store: an iterator over the prefix's schedule keys, seeked to
// after when after is within or past the prefix's range, that stops at limit rows or at the
// prefix's end, from one snapshot. The keys are copied into one arena the rows share.
func (s *Store) ListSchedule(ctx context.Context, prefix, after []byte, limit int) ([]store.KeyRow, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if limit <= 0 {
		return nil, fmt.Errorf("store: list schedule: limit %d: %w", limit, store.ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: list schedule of %q: %w", prefix, err)
	}
	p := keyspace.Schedule(prefix)
	start := p
	if after != nil && bytes.Compare(after, prefix) >= 0 {
		// Every key of the prefix is ≥ prefix, so a cursor below it starts nowhere but the
		// prefix's first key; one at or past it is where the seek lands (on after itself when
		// it is stored, which is skipped: after is exclusive).
		start = keyspace.Schedule(after)
	}
	var out []store.KeyRow
	var arena []byte
	err := s.db.View(func(txn *badger.Txn) error {
		s.catchUpView(txn.ReadTs())
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: p})
		defer it.Close()
		for it.Seek(start); it.Valid() && len(out) < limit; it.Next() {
			item := it.Item()
			key := item.Key()[len(p)-len(prefix):]
			if after != nil && bytes.Equal(key, after) {
				continue
			}
			var r store.KeyRow
			if err := item.Value(r.Row.UnmarshalBinary); err != nil {
				return fmt.Errorf("store: schedule row %q: %w", item.Key(), err)
			}
			if len(arena)+len(key) > cap(arena) {
				arena = make([]byte, 0, max(min(4096, (limit-len(out))*96), 2*len(key)))
			}
			arena = append(arena, key...)
			r.Key = arena[len(arena)-len(key) : len(arena) : len(arena)]
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ForEachScheduleWithTarget calls fn with every schedule row and its target (nil when the key has
// none), in cache-key order, from one snapshot, until fn or ctx returns an error. The schedule
// and target key ranges are in the same cache-key order, so it walks them side by side and finds
// a row's target by moving forward: a point read per row would search every level of the tree
// for each (the capacity recount reads every row this way: capacity.JoinedSource).
func (s *Store) ForEachScheduleWithTarget(ctx context.Context, fn func(key []byte, row store.Row, tgt *store.Target) error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	sp, tp := []byte(keyspace.PrefixSchedule), []byte(keyspace.PrefixTarget)
	return s.db.View(func(txn *badger.Txn) error {
		s.catchUpView(txn.ReadTs())
		rows := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: sp})
		defer rows.Close()
		targets := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: tp})
		defer targets.Close()
		targets.Seek(tp)
		var row store.Row
		var tgt store.Target
		n := 0
		for rows.Seek(sp); rows.Valid(); rows.Next() {
			if n%chunkCheck == 0 { // the first row's turn included
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			n++
			item := rows.Item()
			key := item.Key()[len(sp):]
			if err := item.Value(row.UnmarshalBinary); err != nil {
				return fmt.Errorf("store: schedule row %q: %w", key, err)
			}
			for targets.Valid() && bytes.Compare(targets.Item().Key()[len(tp):], key) < 0 {
				targets.Next() // a target with no schedule row
			}
			var t *store.Target
			if targets.Valid() && bytes.Equal(targets.Item().Key()[len(tp):], key) {
				if err := targets.Item().Value(tgt.UnmarshalBinary); err != nil {
					return fmt.Errorf("store: target %q: %w", key, err)
				}
				t = &tgt
			}
			if err := fn(key, row, t); err != nil {
				return err
			}
		}
		return nil
	})
}

// chunkCheck is how many rows a long read walks between looks at its context.
const chunkCheck = 4096
