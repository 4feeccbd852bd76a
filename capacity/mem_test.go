package capacity

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// TestLedgerMemoryPerRow reports what the ledger holds per row (it keeps one entry per key to
// know a write's old contribution): run with -v to see it.
func TestLedgerMemoryPerRow(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a ledger of 200k rows")
	}
	pol := testPolicy(t)
	l := NewLedger(func() *policy.Policy { return pol })
	const n = 200_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("desktop|https://example.test/p/%d", i))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, k := range keys {
		l.Put(k, store.Row{DueAtMs: 1, Projection: store.Projection{Submitted: true}}, nil)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(l)
	per := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
	t.Logf("ledger: %.0f bytes per row", per)
	if per > 48 {
		t.Errorf("%.0f bytes per row, over 48", per)
	}
	runtime.KeepAlive(keys)
}

// listSource is a Source over fixed rows without targets that allocates nothing per row, so
// that what a recount from it allocates is the ledger's own. before, when set, runs before the
// recount reads row i.
type listSource struct {
	keys   [][]byte
	row    store.Row
	before func(i int)
}

func (s *listSource) ForEachSchedule(_ []byte, fn func([]byte, store.Row) error) error {
	for i, k := range s.keys {
		if s.before != nil {
			s.before(i)
		}
		if err := fn(k, s.row); err != nil {
			return err
		}
	}
	return nil
}

func (s *listSource) GetTarget([]byte) (store.Target, error) {
	return store.Target{}, store.ErrNotFound
}

// TestRecountKeepsOneCopyOfTheRows: a recount corrects the ledger's entries where they are, so
// that a node never holds its rows twice, once as the ledger has them and once as the recount
// read them, nor keeps a set of the keys written while it reads: a recount of rows the ledger
// knows, half of them written again while it reads, allocates nothing per row.
func TestRecountKeepsOneCopyOfTheRows(t *testing.T) {
	pol := testPolicy(t)
	l := NewLedger(func() *policy.Policy { return pol })
	const n = 100_000
	keys := make([][]byte, n)
	row := store.Row{DueAtMs: 1, Projection: store.Projection{Submitted: true}}
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("desktop|https://example.test/p/%d", i))
		l.Put(keys[i], row, nil)
	}
	src := &listSource{keys: keys, row: row, before: func(i int) {
		if i%2 == 0 {
			l.Put(keys[i], row, nil) // a result committed while the recount reads
		}
	}}
	want := l.Demand()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err := l.Recount(src, nopLog)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if d.Rows != n || d.RowsDiffering != 0 {
		t.Fatalf("drift %+v: want %d rows, none differing", d, n)
	}
	if got := l.Demand(); got.Total != want.Total || got.Rows != want.Rows {
		t.Fatalf("demand after the recount %+v, want %+v", got, want)
	}
	per := float64(after.TotalAlloc-before.TotalAlloc) / n
	t.Logf("a recount of %d known rows allocated %.1f bytes per row", n, per)
	if per > 2 {
		t.Errorf("a recount allocated %.1f bytes per row: it copies the rows it reads", per)
	}
}

// TestFailedRecountKeepsEveryEntry: a recount that stops part-way (its context ends) leaves the
// entries it read as the store has them and drops none, the counts still the sum of the
// entries; the next recount that reads everything drops the entry the store has no row for.
func TestFailedRecountKeepsEveryEntry(t *testing.T) {
	pol := testPolicy(t)
	l := NewLedger(func() *policy.Policy { return pol })
	discovered, submitted := store.Row{DueAtMs: 1}, store.Row{DueAtMs: 1, Projection: store.Projection{Submitted: true}}
	keys := [][]byte{[]byte("desktop|https://example.test/p/1"), []byte("desktop|https://example.test/p/2")}
	gone := []byte("desktop|https://example.test/p/gone") // no row in the store
	for _, k := range append(slices.Clone(keys), gone) {
		l.Put(k, discovered, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	src := &listSource{keys: keys, row: submitted, before: func(i int) {
		if i == 1 {
			cancel() // the second row is not read
		}
	}}
	if _, err := l.RecountContext(ctx, src, nopLog); !errors.Is(err, context.Canceled) {
		t.Fatalf("recount stopped part-way: %v, want context.Canceled", err)
	}
	d := l.Demand()
	if d.Rows != 3 || d.ByLane["submitted"] != d.ByLane["discovered"]/2 {
		t.Fatalf("after a recount that read one row of three: %d rows, by lane %v; want 3 rows, the one read now submitted", d.Rows, d.ByLane)
	}
	if _, err := l.Recount(&listSource{keys: keys, row: submitted}, nopLog); err != nil {
		t.Fatal(err)
	}
	if d := l.Demand(); d.Rows != 2 || d.ByLane["discovered"] != 0 {
		t.Fatalf("after a full recount: %d rows, by lane %v; want the 2 stored rows, submitted", d.Rows, d.ByLane)
	}
}
