package funnel

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// With invariants enabled the funnel checks every hint it uses against Badger; the check
// itself must catch a hint that differs.
func TestRowHintCheckCatchesAStaleHint(t *testing.T) {
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	sch, err := store.NewSchedule([]byte("k"), 100, false, 3_600_000, store.Lanes{})
	if err != nil {
		t.Fatal(err)
	}
	row := sch.Row()
	rowVal, _ := RowValues(row)
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(keyspace.Schedule([]byte("k")), rowVal) }); err != nil {
		t.Fatal(err)
	}
	o := &op{key: []byte("k"), sKey: keyspace.Schedule([]byte("k"))}
	check := func(hinted store.Row) (msg string) {
		defer func() {
			if r := recover(); r != nil {
				msg, _ = r.(string)
			}
		}()
		if err := db.View(func(txn *badger.Txn) error { checkHint(txn, o, hinted); return nil }); err != nil {
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
	var f Funnel
	for i := range maxRowHints + 10 {
		f.HintRow([]byte("k"+strconv.Itoa(i)), store.Row{DueAtMs: int64(i)})
	}
	f.hints.mu.Lock()
	n := len(f.hints.m)
	f.hints.mu.Unlock()
	if n != 10 {
		t.Fatalf("%d hints held after %d, want 10 (the map started again at %d)", n, maxRowHints+10, maxRowHints)
	}
}
