package dueorder

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/internal/invariants"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// Stats is what one walk of the due index observed.
type Stats struct {
	Rows        int
	FirstDue    int64
	HasFirstDue bool
	NextDue     int64 // the first due time past now, if the walk reached one
	HasNextDue  bool
	Capped      bool // stopped at maxRows with a further due row waiting
	Complete    bool // reached a row past now or the end of the index
}

// Cursor is where a walk of the due order starts: at the first row at or after (Ms, Key),
// or strictly after it when After is set. A nil Key is the first key of Ms. A cursor before 0
// seeks from 0: no due time is negative, and the index's unsigned order would put a negative
// one after every other.
type Cursor struct {
	Ms    int64
	Key   []byte
	After bool
}

// DueSeek returns the d/ key a walk from c seeks to.
func (c Cursor) DueSeek() []byte {
	if c.Ms < 0 {
		return keyspace.Due(0, nil)
	}
	k := keyspace.Due(c.Ms, c.Key)
	if c.After {
		// The smallest key after (ms, key): the key itself with a 0x00 byte appended, since
		// no other cacheKey lies between a key and that extension.
		k = append(k, 0)
	}
	return k
}

// ClassSeek returns the c/ key a walk from c seeks to in class.
func (c Cursor) ClassSeek(class uint32) []byte {
	if c.Ms < 0 {
		return keyspace.Class(class, 0, nil)
	}
	k := keyspace.Class(class, c.Ms, c.Key)
	if c.After {
		k = append(k, 0)
	}
	return k
}

// Bound is a lower bound of the due times of a class's rows (B1: badgerstore's protocol.go).
type Bound struct {
	Class   uint32
	BoundMs int64
}

// WalkIndex walks the d/ index of txn from the cursor up to and including nowMs, key-only (the
// projection is the index entry's inline value, so no value-log read happens), calling visit
// for each due row in ascending (due, key) order. key aliases Badger's buffer and is valid only
// during the call; so is the row. The walk stops after maxRows rows (0 = no cap), at the first
// row past nowMs (recorded as the next not-yet-due time), at the end of the index, or at the
// first error.
func WalkIndex(txn *badger.Txn, from Cursor, nowMs int64, maxRows int, visit func(key []byte, r *store.Row) error) (Stats, error) {
	seek, fromMs := from.DueSeek(), from.Ms
	var st Stats
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(keyspace.PrefixDue)})
	defer it.Close()
	var row store.Row
	decode := row.Projection.UnmarshalBinary
	prev := int64(-1)
	for it.Seek(seek); ; it.Next() {
		if !it.Valid() {
			st.Complete = true
			return st, nil
		}
		item := it.Item()
		due, key, err := keyspace.DecodeDue(item.Key())
		if err != nil {
			return st, err
		}
		if invariants.Enabled {
			if due < prev || due < fromMs {
				panic(fmt.Sprintf("store: invariant: due index out of order: %d after %d, from %d", due, prev, fromMs))
			}
			prev = due
		}
		if due > nowMs {
			st.NextDue, st.HasNextDue, st.Complete = due, true, true
			return st, nil
		}
		if maxRows > 0 && st.Rows >= maxRows {
			st.Capped = true
			return st, nil
		}
		if err := item.Value(decode); err != nil {
			return st, fmt.Errorf("due entry %q: %w", key, err)
		}
		row.DueAtMs = due
		if !st.HasFirstDue {
			st.FirstDue, st.HasFirstDue = due, true
		}
		st.Rows++
		if err := visit(key, &row); err != nil {
			return st, err
		}
	}
}
