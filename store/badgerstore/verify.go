package badgerstore

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// VerifyIndex checks, over one snapshot, that every schedule row has its due-index entry and
// every entry its row. It reads every row and entry, with one point read per record: an
// operator's and a test's tool, not something to run per sweep.
//
// In a store with a classifier the class index is the due index (package dueorder walks it): each of its
// entries counts under Entries and ClassEntries, each disagreement with the rows under both
// pairs of counts, and a d/ entry, which such a store never keeps, as an entry without its row.
func (s *Store) VerifyIndex() (store.IndexReport, error) {
	var rep store.IndexReport
	if s.closed.Load() {
		return rep, store.ErrClosed
	}
	note := func(k []byte) {
		if len(rep.Examples) < 8 {
			rep.Examples = append(rep.Examples, string(k))
		}
	}
	err := s.db.View(func(txn *badger.Txn) error {
		s.catchUpView(txn.ReadTs())
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(keyspace.PrefixSchedule)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			rep.Rows++
			item := it.Item()
			var r store.Row
			if err := item.Value(r.UnmarshalBinary); err != nil {
				rep.Corrupt++
				note(item.Key())
				continue
			}
			ck := item.Key()[len(keyspace.PrefixSchedule):]
			if c := s.opts.Classifier; c != nil {
				switch _, err := txn.Get(keyspace.Class(c.Class(ck, r.Projection), r.DueAtMs, ck)); {
				case errors.Is(err, badger.ErrKeyNotFound):
					rep.RowsWithoutEntry++
					rep.RowsWithoutClassEntry++
					note(item.Key())
				case err != nil:
					return err
				}
				continue
			}
			switch _, err := txn.Get(keyspace.Due(r.DueAtMs, ck)); {
			case errors.Is(err, badger.ErrKeyNotFound):
				rep.RowsWithoutEntry++
				note(item.Key())
			case err != nil:
				return err
			}
		}
		it.Close()
		if c := s.opts.Classifier; c != nil {
			if err := verifyClassEntries(txn, c, &rep, note); err != nil {
				return err
			}
			rep.Entries, rep.EntriesWithoutRow = rep.ClassEntries, rep.ClassEntriesWithoutRow
		}

		dit := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(keyspace.PrefixDue)})
		defer dit.Close()
		for dit.Rewind(); dit.Valid(); dit.Next() {
			rep.Entries++
			item := dit.Item()
			if s.opts.Classifier != nil {
				rep.EntriesWithoutRow++
				note(item.Key())
				continue
			}
			due, ck, err := keyspace.DecodeDue(item.Key())
			var p store.Projection
			if err == nil {
				err = item.Value(p.UnmarshalBinary)
			}
			if err != nil {
				rep.Corrupt++
				note(item.Key())
				continue
			}
			ok, err := rowHasEntry(txn, ck, due, p)
			if err != nil {
				return err
			}
			if !ok {
				rep.EntriesWithoutRow++
				note(item.Key())
			}
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("store: verify index: %w", err)
	}
	return rep, nil
}

// verifyClassEntries checks that every class-index entry has its row, at its due time, with its
// projection, under the class the classifier gives it.
func verifyClassEntries(txn *badger.Txn, c store.Classifier, rep *store.IndexReport, note func([]byte)) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(keyspace.PrefixClass)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		rep.ClassEntries++
		item := it.Item()
		class, due, ck, err := keyspace.DecodeClass(item.Key())
		var p store.Projection
		if err == nil {
			err = item.Value(p.UnmarshalBinary)
		}
		if err != nil {
			rep.Corrupt++
			note(item.Key())
			continue
		}
		ok, err := rowHasEntry(txn, ck, due, p)
		if err != nil {
			return err
		}
		if !ok || c.Class(ck, p) != class {
			rep.ClassEntriesWithoutRow++
			note(item.Key())
		}
	}
	return nil
}

// rowHasEntry reports whether the schedule row of ck exists, decodes, and is due at due with
// projection p: what an index entry (d/ or c/) says of it. An error is a read that failed, not
// a row that is missing or differs.
func rowHasEntry(txn *badger.Txn, ck []byte, due int64, p store.Projection) (bool, error) {
	row, err := txn.Get(keyspace.Schedule(ck))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	var r store.Row
	if err := row.Value(r.UnmarshalBinary); err != nil {
		return false, nil
	}
	return r.DueAtMs == due && r.Projection == p, nil
}
