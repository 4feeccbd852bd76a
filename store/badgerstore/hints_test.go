package badgerstore

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

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
	if n := st.hintsUsed.Load(); n != 1 {
		t.Fatalf("hints used: %d, want 1", n)
	}
	if seen := modifySeeing(t, st, "k", 300); seen.Row.DueAtMs != 200 {
		t.Fatalf("the second change saw %+v, want the row the first filed", seen.Row)
	}
	if n := st.hintsUsed.Load(); n != 1 {
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
	if n := st.hintsUsed.Load(); n != 0 {
		t.Fatalf("hints used: %d, want 0", n)
	}
	mustVerify(t, st)
}

// With invariants enabled the funnel checks every hint it uses against Badger; the check
// itself must catch a hint that differs.
func TestRowHintCheckCatchesAStaleHint(t *testing.T) {
	st := openTest(t, nil)
	row := storedRow(t, st)
	o := &op{key: []byte("k"), sKey: scheduleKey([]byte("k"))}
	check := func(hinted store.Row) (msg string) {
		defer func() {
			if r := recover(); r != nil {
				msg, _ = r.(string)
			}
		}()
		if err := st.db.View(func(txn *badger.Txn) error { st.checkHint(txn, o, hinted); return nil }); err != nil {
			t.Fatal(err)
		}
		return ""
	}
	if msg := check(row); msg != "" {
		t.Fatalf("the stored row as its own hint: %s", msg)
	}
	stale := row
	stale.DueAtMs--
	if msg := check(stale); !strings.Contains(msg, "invariant RH1") {
		t.Fatalf("a stale hint passed the check (%q)", msg)
	}
}

// The hints are bounded: at maxRowHints the map starts again, so unused hints cannot grow
// without end.
func TestRowHintsAreBounded(t *testing.T) {
	st := openTest(t, nil)
	for i := range maxRowHints + 10 {
		st.HintRow([]byte("k"+strconv.Itoa(i)), store.Row{DueAtMs: int64(i)})
	}
	st.hintMu.Lock()
	n := len(st.hints)
	st.hintMu.Unlock()
	if n != 10 {
		t.Fatalf("%d hints held after %d, want 10 (the map started again at %d)", n, maxRowHints+10, maxRowHints)
	}
}
