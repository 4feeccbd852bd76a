package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/store"
)

// The joined read hands every schedule row the target a point read finds, a row without one a
// nil target, and passes over targets with no row: before the first row, between two, after
// the last.
func TestForEachScheduleWithTargetMatchesPointReads(t *testing.T) {
	st := openTest(t, nil)
	const n = 300
	ws := make([]store.Write, 0, n)
	for i := range n {
		w := store.Write{Schedule: mustSchedule(t, fmt.Sprintf("k%03d", i), int64(i), i%2 == 0, 0, store.Lanes{})}
		if i%3 != 0 {
			tg := sampleTarget()
			tg.StoredIntervalMs = int64(60_000 + i)
			w.Target = &tg
		}
		ws = append(ws, w)
	}
	mustWrite(t, st, ws...)
	orphan, err := sampleTarget().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.db.Update(func(txn *badger.Txn) error {
		for _, k := range []string{"a", "k100x", "z"} {
			if err := txn.Set(targetKey([]byte(k)), orphan); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	read, withTarget := 0, 0
	err = st.ForEachScheduleWithTarget(context.Background(), func(key []byte, row store.Row, tgt *store.Target) error {
		read++
		if want, err := st.GetSchedule(key); err != nil || !reflect.DeepEqual(row, want) {
			return fmt.Errorf("row %q: %+v, a point read %+v (%v)", key, row, want, err)
		}
		want, err := st.GetTarget(key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if tgt != nil {
				return fmt.Errorf("row %q has no target, the walk gave %+v", key, *tgt)
			}
		case err != nil:
			return err
		case tgt == nil:
			return fmt.Errorf("row %q: no target, a point read %+v", key, want)
		case !reflect.DeepEqual(*tgt, want):
			return fmt.Errorf("row %q: target %+v, a point read %+v", key, *tgt, want)
		default:
			withTarget++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if read != n || withTarget != n-n/3 {
		t.Fatalf("read %d rows, %d with a target; want %d and %d", read, withTarget, n, n-n/3)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	err = st.ForEachScheduleWithTarget(ctx, func([]byte, store.Row, *store.Target) error { calls++; return nil })
	if !errors.Is(err, context.Canceled) || calls != 0 {
		t.Fatalf("a cancelled read: %v after %d rows, want context.Canceled before any", err, calls)
	}
}
