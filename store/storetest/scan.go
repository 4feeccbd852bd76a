package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/freshq/freshq/store"
)

func testScanDue(t *testing.T, open Opener) {
	st := open(t, Options{})
	fill(t, st, 100, 1000, 10) // due 1000, 1010, … 1990

	res, err := st.ScanDue(0, 1495, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 50 || !res.HasFirstDue || res.FirstDueMs != 1000 || !res.HasNextDue || res.NextDueMs != 1500 || res.Capped {
		t.Fatalf("unfloored: %d rows, %+v", len(res.Rows), res)
	}
	for i, r := range res.Rows {
		if string(r.Key) != urlKey(i) || r.DueAtMs != 1000+int64(i)*10 || r.EffectiveIntervalMs != int64(i) ||
			r.Submitted != (i%3 == 0) || r.Failing != (i%5 == 0) {
			t.Fatalf("row %d: %+v", i, r)
		}
	}

	// Floored and capped: the scan starts at the floor and says it stopped early.
	res, _ = st.ScanDue(1200, 1495, 5)
	if len(res.Rows) != 5 || res.FirstDueMs != 1200 || !res.Capped || res.HasNextDue {
		t.Fatalf("floored capped: %+v", res)
	}
	// Exactly the due rows fit the limit: not capped, next due seen.
	res, _ = st.ScanDue(1450, 1495, 5)
	if len(res.Rows) != 5 || res.Capped || res.NextDueMs != 1500 {
		t.Fatalf("exact fit: %+v", res)
	}
	// Nothing due.
	res, _ = st.ScanDue(0, 999, 5)
	if len(res.Rows) != 0 || res.HasFirstDue || res.NextDueMs != 1000 {
		t.Fatalf("nothing due: %+v", res)
	}
	// Past the end of the index.
	res, _ = st.ScanDue(5000, 9999, 5)
	if len(res.Rows) != 0 || res.HasNextDue {
		t.Fatalf("past the end: %+v", res)
	}
	if _, err := st.ScanDue(0, 1, 0); !isErr(err, store.ErrInvalidArgument) {
		t.Fatalf("limit 0: %v", err)
	}
}

// Pages chained on (due, key) read every due row exactly once, even when a whole page shares
// one due time: the cursor is the last row of the previous page, not its due time.
func testScanDueAfterPagesByDueAndKey(t *testing.T, open Opener) {
	st := open(t, Options{})
	var want []string
	var ws []store.Write
	for i := range 200 {
		k := fmt.Sprintf("desktop|https://shop.test/same/%03d", i)
		ws = append(ws, put(t, k, 5_000))
		want = append(want, k)
	}
	mustWrite(t, st, ws...)
	mustWrite(t, st, put(t, "desktop|https://shop.test/later", 5_001))
	want = append(want, "desktop|https://shop.test/later")
	var got []string
	res, err := st.ScanDue(0, 9_000, 64)
	for pages := 0; ; pages++ {
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Rows {
			got = append(got, string(r.Key))
		}
		if !res.Capped || pages > 10 {
			break
		}
		last := res.Rows[len(res.Rows)-1]
		res, err = st.ScanDueAfter(last.DueAtMs, last.Key, 9_000, 64)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paged %d rows, want %d in order:\n%v", len(got), len(want), got)
	}
	// After the last row: nothing; a negative cursor is the start.
	if res, _ := st.ScanDueAfter(5_001, []byte("desktop|https://shop.test/later"), 9_000, 10); len(res.Rows) != 0 {
		t.Fatalf("after the last row: %+v", res)
	}
	if res, _ := st.ScanDueAfter(-1, nil, 9_000, 1); len(res.Rows) != 1 || string(res.Rows[0].Key) != want[0] {
		t.Fatalf("from the start: %+v", res)
	}
}

func testPassIterateDueChunks(t *testing.T, open Opener) {
	st := open(t, Options{})
	fill(t, st, 103, 0, 1) // due 0..102
	p, err := st.BeginPass(99)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var sizes []int
	var seen []string
	err = p.IterateDue(0, 10, func(rows []store.DueRow) error {
		sizes = append(sizes, len(rows))
		for _, r := range rows {
			seen = append(seen, fmt.Sprintf("%s@%d", r.Key, r.DueAtMs))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 100 || len(sizes) != 10 || sizes[9] != 10 {
		t.Fatalf("%d rows in chunks %v", len(seen), sizes)
	}
	// Every due row once, each key with its own due time. The order is the backend's (store.Pass):
	// a key that does not match its row's due time was overwritten by another of its chunk.
	got := map[string]bool{}
	for _, s := range seen {
		got[s] = true
	}
	for i := range 100 {
		if want := fmt.Sprintf("%s@%d", urlKey(i), i); !got[want] {
			t.Fatalf("%s missing from %v: keys of one chunk overwrote each other, or a row was lost", want, seen)
		}
	}
	stats := p.Stats()
	if stats.Rows != 100 || stats.FirstDueMs != 0 || stats.NextDueMs != 100 || !stats.HasNextDue || stats.Capped || !stats.Complete {
		t.Fatalf("stats %+v", stats)
	}
	if err := p.IterateDue(0, 10, func([]store.DueRow) error { return nil }); !isErr(err, store.ErrPassIterated) {
		t.Fatalf("second iteration: %v", err)
	}
}

func testPassIterateDueCapAndErrors(t *testing.T, open Opener) {
	st := open(t, Options{})
	fill(t, st, 50, 100, 1)

	p, _ := st.BeginPass(1000)
	n := 0
	if err := p.IterateDue(7, 3, func(rows []store.DueRow) error { n += len(rows); return nil }); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); n != 7 || !s.Capped || s.Complete || s.FirstDueMs != 100 {
		t.Fatalf("capped: %d rows, %+v", n, s)
	}
	p.Close()
	p.Close() // twice is fine
	if err := p.IterateDue(1, 1, nil); !isErr(err, store.ErrClosed) {
		t.Fatalf("iterate after close: %v", err)
	}

	stop := errors.New("stop")
	p, _ = st.BeginPass(1000)
	defer p.Close()
	if err := p.IterateDue(0, 4, func([]store.DueRow) error { return stop }); err != stop {
		t.Fatalf("callback error: %v", err)
	}
	if s := p.Stats(); !s.HasFirstDue || s.Complete {
		t.Fatalf("stopped pass: %+v", s)
	}
	if _, err := st.BeginPass(-1); !isErr(err, store.ErrInvalidArgument) {
		t.Fatalf("negative now: %v", err)
	}
	q, _ := st.BeginPass(1)
	defer q.Close()
	if err := q.IterateDue(0, 0, nil); !isErr(err, store.ErrInvalidArgument) {
		t.Fatalf("chunk 0: %v", err)
	}
}

// An error from fn stops the walk within one chunk and is returned as is; a panic in fn
// reaches the caller's goroutine, where the sweep's recover catches it.
func testPassIterateDueStopsOnFnErrorAndPanic(t *testing.T, open Opener) {
	st := open(t, Options{})
	fill(t, st, 100, 0, 1)
	stop := errors.New("stop")
	p, _ := st.BeginPass(1000)
	defer p.Close()
	calls := 0
	if err := p.IterateDue(0, 10, func([]store.DueRow) error { calls++; return stop }); err != stop {
		t.Fatalf("callback error: %v", err)
	}
	if rows := p.Stats().Rows; calls != 1 || rows > 20 {
		t.Fatalf("fn called %d times, %d rows read after it failed on the first chunk", calls, rows)
	}

	for _, chunk := range []int{1, 10, 1000} { // panic on a middle chunk, and on the final flush
		q, _ := st.BeginPass(1000)
		func() {
			defer func() {
				if v := recover(); v != "boom" {
					t.Errorf("chunk %d: recovered %v, want the callback's panic", chunk, v)
				}
			}()
			n := 0
			_ = q.IterateDue(0, chunk, func(rows []store.DueRow) error {
				if n += len(rows); n >= 50 {
					panic("boom")
				}
				return nil
			})
			t.Errorf("chunk %d: IterateDue returned after its callback panicked", chunk)
		}()
		q.Close()
	}
	// The store is still usable after a pass whose callback panicked.
	mustWrite(t, st, put(t, "after", 5))
	if _, err := st.ScanDue(0, 1000, 1); err != nil {
		t.Fatal(err)
	}
}

// A pass reads its snapshot: writes after BeginPass are invisible to it.
func testPassReadsItsSnapshot(t *testing.T, open Opener) {
	st := open(t, Options{})
	fill(t, st, 10, 100, 1)
	p, _ := st.BeginPass(1000)
	defer p.Close()
	mustWrite(t, st, put(t, "late", 50))
	mustWrite(t, st, put(t, urlKey(3), 5_000)) // moved out of the pass's window after its snapshot
	n := 0
	_ = p.IterateDue(0, 100, func(rows []store.DueRow) error { n += len(rows); return nil })
	if n != 10 || p.Stats().FirstDueMs != 100 {
		t.Fatalf("pass saw %d rows, first %d", n, p.Stats().FirstDueMs)
	}
}
