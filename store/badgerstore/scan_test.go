package badgerstore

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/freshq/freshq/store"
)

// fill writes n rows due at base, base+step, … and returns their keys in due order.
func fill(t testing.TB, st *Store, n int, base, step int64) []string {
	t.Helper()
	keys := make([]string, n)
	ws := make([]store.Write, n)
	for i := range n {
		keys[i] = urlKey(i)
		ws[i] = store.Write{Schedule: mustSchedule(t, keys[i], base+int64(i)*step, i%3 == 0, int64(i), store.Lanes{Failing: i%5 == 0})}
	}
	mustWrite(t, st, ws...)
	return keys
}

func TestScanDueReportsCorruptIndex(t *testing.T) {
	st := openTest(t, nil)
	fill(t, st, 3, 10, 1)
	rawSet(t, st, dueKey(11, []byte("x")), []byte{1, 2, 3})
	if _, err := st.ScanDue(0, 100, 10); !store.IsCorruptionError(err) {
		t.Fatalf("corrupt projection: %v", err)
	}
	p, _ := st.BeginPass(100)
	defer p.Close()
	if err := p.IterateDue(0, 10, func([]store.DueRow) error { return nil }); !store.IsCorruptionError(err) {
		t.Fatalf("pass over a corrupt projection: %v", err)
	}
}

// fn runs on its own goroutine while the next chunk is read: the rows it was handed must stay
// untouched until it returns (under -race, a producer writing into a chunk fn still reads is a
// reported race), the calls never overlap, and they come in due order.
func TestPassIterateDueOverlapsFn(t *testing.T) {
	st := openTest(t, nil)
	fill(t, st, 1000, 0, 1)
	p, _ := st.BeginPass(10_000)
	defer p.Close()
	var inFn, calls, next int
	err := p.IterateDue(0, 7, func(rows []store.DueRow) error {
		inFn++
		defer func() { inFn-- }()
		if inFn != 1 {
			t.Errorf("fn runs %d times at once", inFn)
		}
		calls++
		at := make([]string, len(rows))
		for i, r := range rows {
			at[i] = string(r.Key)
		}
		for range 100 {
			runtime.Gosched() // give the producer every chance to fill the other chunk
		}
		for i, r := range rows {
			if string(r.Key) != at[i] || at[i] != urlKey(next) || r.DueAtMs != int64(next) {
				// fn runs off the test goroutine, where t.Fatal must not be called.
				return fmt.Errorf("call %d row %d: %q at entry, %q at exit, want %q", calls, i, at[i], r.Key, urlKey(next))
			}
			next++
		}
		return nil
	})
	if err != nil || next != 1000 || calls != 143 {
		t.Fatalf("err %v, %d rows in %d calls", err, next, calls)
	}
}
