package funnel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// The class index's writes outside a funnel batch (badgerstore's classindex.go): at Open,
// before the committer starts, the index is made to agree with the store's classifier. They
// live here because every write of the store does.

// opener is what OpenIndex works with.
type opener struct {
	db  *badger.DB
	c   store.Classifier
	log zerolog.Logger
}

// OpenIndex makes the due index of db agree with c (nil: no classifier), as openClassIndex
// says. The store calls it in Open, before Start.
func OpenIndex(db *badger.DB, c store.Classifier, log zerolog.Logger) error {
	return (&opener{db: db, c: c, log: log}).openClassIndex()
}

// openClassIndex makes the due index agree with the store's classifier. A store with a
// classifier keeps its due index under classes (c/, with the classifier's fingerprint under
// m/class) and no d/ entries; one without keeps d/ and no class index. Open rebuilds the one
// in force from the schedule rows when it is missing or was built for another classifier, and
// drops the other. It runs in Open, before the funnel starts.
//
// Every step can be cut by a crash, and the next Open finishes the change, because the steps
// keep one rule: m/class absent means d/ is complete. d/ is dropped only after m/class is
// written, and m/class deleted only after d/ is rebuilt.
func (f *opener) openClassIndex() error {
	var stored uint64
	var has bool
	err := f.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(keyspace.ClassPrint))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != keyspace.ClassPrintValueLen {
				return keyspace.Corruptionf("class fingerprint: length %d", len(v))
			}
			stored, has = binary.BigEndian.Uint64(v), true
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("store: read class fingerprint: %w", err)
	}
	c := f.c
	switch {
	case c == nil && !has:
		return nil
	case c == nil:
		return f.rebuildDueIndex()
	case !has || stored != c.Fingerprint():
		if err := f.rebuildClassIndex(c); err != nil {
			return err
		}
	}
	return f.dropDueIndex()
}

// dropDueIndex drops what d/ entries a store with a classifier still holds: all of them, the
// first time it is opened with one, and none after that.
func (f *opener) dropDueIndex() error {
	var present bool
	err := f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(keyspace.PrefixDue)})
		defer it.Close()
		it.Rewind()
		present = it.Valid()
		return nil
	})
	if err != nil || !present {
		return err
	}
	if err := f.db.DropPrefix([]byte(keyspace.PrefixDue)); err != nil {
		return fmt.Errorf("store: drop due index: %w", err)
	}
	f.log.Info().Msg("due index dropped: the class index orders the rows by due time")
	return nil
}

// rebuildDueIndex writes d/ afresh from the schedule rows for a store opened without a
// classifier that last had one, then deletes the fingerprint and drops the class index.
func (f *opener) rebuildDueIndex() error {
	start := time.Now()
	if err := f.db.DropPrefix([]byte(keyspace.PrefixDue)); err != nil {
		return fmt.Errorf("store: drop due index: %w", err)
	}
	n, err := f.writeIndexFromRows(func(ck []byte, r *store.Row) []byte { return keyspace.Due(r.DueAtMs, ck) })
	if err == nil {
		err = f.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(keyspace.ClassPrint)) })
	}
	if err == nil {
		err = f.db.DropPrefix([]byte(keyspace.PrefixClass))
	}
	if err != nil {
		return fmt.Errorf("store: rebuild due index: %w", err)
	}
	f.log.Info().Int("rows", n).Dur("took", time.Since(start)).Msg("due index rebuilt and class index dropped: the store is open without a classifier")
	return nil
}

// rebuildClassIndex writes the class index afresh from the schedule rows, then the
// fingerprint: a crash in between leaves no fingerprint, or the old one, and the next Open
// rebuilds again.
func (f *opener) rebuildClassIndex(c store.Classifier) error {
	start := time.Now()
	if err := f.db.DropPrefix([]byte(keyspace.PrefixClass)); err != nil {
		return fmt.Errorf("store: drop class index: %w", err)
	}
	n, err := f.writeIndexFromRows(func(ck []byte, r *store.Row) []byte {
		return keyspace.Class(c.Class(ck, r.Projection), r.DueAtMs, ck)
	})
	if err == nil {
		err = f.db.Update(func(txn *badger.Txn) error {
			return txn.Set([]byte(keyspace.ClassPrint), binary.BigEndian.AppendUint64(nil, c.Fingerprint()))
		})
	}
	if err != nil {
		return fmt.Errorf("store: rebuild class index: %w", err)
	}
	f.log.Info().Int("rows", n).Dur("took", time.Since(start)).Msg("class index rebuilt for the classifier in force")
	return nil
}

// writeIndexFromRows writes, for every schedule row, the index entry keyed by indexKey with the
// row's projection, and returns how many it wrote.
func (f *opener) writeIndexFromRows(indexKey func(ck []byte, r *store.Row) []byte) (int, error) {
	wb := f.db.NewWriteBatch()
	defer wb.Cancel()
	n := 0
	err := f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(keyspace.PrefixSchedule)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			var r store.Row
			if err := item.Value(r.UnmarshalBinary); err != nil {
				return fmt.Errorf("schedule row %q: %w", item.Key(), err)
			}
			ck := item.Key()[len(keyspace.PrefixSchedule):]
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
