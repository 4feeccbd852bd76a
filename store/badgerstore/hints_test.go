package badgerstore

import (
	"testing"

	"github.com/freshq/freshq/store"
)

// modifySeeing applies one Change to key that files it due at dueMs, and returns the row its
// Decide was shown.
func modifySeeing(t *testing.T, st *Store, key string, dueMs int64) store.Current {
	t.Helper()
	var seen store.Current
	_, err := st.Modify([]store.Change{{Key: []byte(key), MinDueMs: dueMs, Decide: func(cur store.Current) (store.Write, bool, error) {
		seen = cur
		sch, err := store.NewSchedule([]byte(key), dueMs, false, cur.Row.EffectiveIntervalMs, store.Lanes{})
		return store.Write{Schedule: sch}, err == nil, err
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// storedRow files row "k" due 100 with a one-hour cadence, and returns it as stored.
func storedRow(t *testing.T, st *Store) store.Row {
	t.Helper()
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, "k", 100, false, 3_600_000, store.Lanes{})})
	row, err := st.GetSchedule([]byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// A hinted row is what the funnel applies a result over, without reading Badger, and only
// once: the next write of the key reads the row again.
func TestRowHintSavesOneRead(t *testing.T) {
	st := openTest(t, nil)
	row := storedRow(t, st)
	st.HintRow([]byte("k"), row)
	if seen := modifySeeing(t, st, "k", 200); !seen.HasRow || seen.Row != row {
		t.Fatalf("the change saw %+v, want the hinted row %+v", seen, row)
	}
	if n := st.HintsUsed(); n != 1 {
		t.Fatalf("hints used: %d, want 1", n)
	}
	if seen := modifySeeing(t, st, "k", 300); seen.Row.DueAtMs != 200 {
		t.Fatalf("the second change saw %+v, want the row the first filed", seen.Row)
	}
	if n := st.HintsUsed(); n != 1 {
		t.Fatalf("hints used after the second change: %d, want still 1", n)
	}
}

// RH1: a write of a hinted key drops the hint, so a result applied after it sees the row that
// write filed, not the one the sweep read.
func TestRowHintIsDroppedByAWriteOfItsKey(t *testing.T) {
	st := openTest(t, nil)
	read := storedRow(t, st)
	st.HintRow([]byte("k"), read)
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, "k", 150, true, 7_200_000, store.Lanes{})})
	seen := modifySeeing(t, st, "k", 200)
	if seen.Row.DueAtMs != 150 || seen.Row.EffectiveIntervalMs != 7_200_000 {
		t.Fatalf("the change saw %+v, want the row the write filed (due 150)", seen.Row)
	}
	if n := st.HintsUsed(); n != 0 {
		t.Fatalf("hints used: %d, want 0", n)
	}
	mustVerify(t, st)
}
