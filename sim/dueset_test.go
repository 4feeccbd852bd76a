package sim

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/freshq/freshq/store"
)

func mustSchedule(t testing.TB, key string, due int64) store.Schedule {
	t.Helper()
	sch, err := store.NewSchedule([]byte(key), due, true, 3_600_000, store.Lanes{})
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// iterate runs one pass at now and returns the keys it read, in order.
func iterate(t testing.TB, d *DueSet, now int64, maxRows, chunk int) ([]string, store.PassStats) {
	t.Helper()
	p, err := d.BeginPass(now)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var keys []string
	err = p.IterateDue(maxRows, chunk, func(rows []store.DueRow) error {
		if len(rows) == 0 || len(rows) > chunk {
			t.Fatalf("chunk of %d rows, want 1..%d", len(rows), chunk)
		}
		for _, r := range rows {
			keys = append(keys, string(r.Key))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys, p.Stats()
}

func TestDueSetOrderIsTheIndexOrder(t *testing.T) {
	d := NewDueSet(store.NewMemFloor(0))
	// Same due time: key order. Due times across bucket boundaries, written out of order.
	writes := []struct {
		key string
		due int64
	}{{"b", 120_000}, {"a", 120_000}, {"c", 59_999}, {"d", 60_000}, {"e", 1}, {"a", 5}, {"f", 10_000_000}}
	for _, w := range writes {
		if err := d.WriteSchedule(mustSchedule(t, w.key, w.due)); err != nil {
			t.Fatal(err)
		}
	}
	if d.Len() != 6 {
		t.Fatalf("Len %d, want 6 (a was rewritten)", d.Len())
	}
	keys, st := iterate(t, d, 120_000, 0, 2)
	if want := []string{"e", "a", "c", "d", "b"}; !slices.Equal(keys, want) {
		t.Fatalf("order %v, want %v", keys, want)
	}
	if !st.HasFirstDue || st.FirstDueMs != 1 || !st.HasNextDue || st.NextDueMs != 10_000_000 || !st.Complete || st.Capped || st.Rows != 5 {
		t.Fatalf("stats %+v", st)
	}
	keys, st = iterate(t, d, 120_000, 3, 1024)
	if !slices.Equal(keys, []string{"e", "a", "c"}) || !st.Capped || st.Complete {
		t.Fatalf("capped pass read %v, stats %+v", keys, st)
	}
	if row, ok := d.Get([]byte("a")); !ok || row.DueAtMs != 5 {
		t.Fatalf("Get(a) = %+v, %v", row, ok)
	}
}

func TestDueSetRefusesWhatTheStoreRefuses(t *testing.T) {
	d := NewDueSet(store.NewMemFloor(0))
	if err := d.WriteSchedule(store.Schedule{}); !errors.Is(err, store.ErrEmptyKey) {
		t.Fatalf("zero schedule: %v", err)
	}
	if _, err := d.BeginPass(-1); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("negative now: %v", err)
	}
	p, _ := d.BeginPass(10)
	if _, err := d.BeginPass(10); err == nil {
		t.Fatal("a second pass opened while one is open")
	}
	noop := func([]store.DueRow) error { return nil }
	if err := p.IterateDue(0, 0, noop); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("chunk 0: %v", err)
	}
	if err := p.IterateDue(0, 8, noop); err != nil {
		t.Fatal(err)
	}
	if err := p.IterateDue(0, 8, noop); !errors.Is(err, store.ErrPassIterated) {
		t.Fatalf("second iteration: %v", err)
	}
	p.Close()
	p.Close()
	if _, err := d.BeginPass(10); err != nil {
		t.Fatalf("a pass after close: %v", err)
	}
}

func TestDueSetFloorProtocol(t *testing.T) {
	floor := store.NewMemFloor(0)
	d := NewDueSet(floor)
	for i, due := range []int64{1_000_000, 2_000_000, 9_000_000} {
		if err := d.WriteSchedule(mustSchedule(t, fmt.Sprint("k", i), due)); err != nil {
			t.Fatal(err)
		}
	}
	if floor.Load() != 0 {
		t.Fatalf("writes above the floor moved it: %d", floor.Load())
	}
	// The advance is bounded by the first due row observed, less the guard.
	p, _ := d.BeginPass(5_000_000)
	_ = p.IterateDue(0, 16, func([]store.DueRow) error { return nil })
	if f, ok := p.AdvanceFloor(300_000); !ok || f != 700_000 {
		t.Fatalf("advance to %d (%v), want 700000", f, ok)
	}
	p.Close()
	// A write below the floor lowers it.
	if err := d.WriteSchedule(mustSchedule(t, "late", 100)); err != nil || floor.Load() != 100 {
		t.Fatalf("write below the floor: err %v, floor %d", err, floor.Load())
	}
	// With nothing due, the advance is bounded by now.
	e := NewDueSet(store.NewMemFloor(0))
	_ = e.WriteSchedule(mustSchedule(t, "future", 50_000_000))
	p, _ = e.BeginPass(1_000_000)
	_ = p.IterateDue(0, 16, func([]store.DueRow) error { return nil })
	if f, ok := p.AdvanceFloor(300_000); !ok || f != 700_000 {
		t.Fatalf("advance with nothing due: %d (%v), want now − guard", f, ok)
	}
	p.Close()
	// A write made while a pass is open bounds that pass's advance.
	p, _ = e.BeginPass(2_000_000)
	_ = p.IterateDue(0, 16, func([]store.DueRow) error { return nil })
	_ = e.WriteSchedule(mustSchedule(t, "raced", 900_000))
	if f, _ := p.AdvanceFloor(0); f != 900_000 {
		t.Fatalf("the pass advanced to %d: it must stop at the write it did not see (900000)", f)
	}
	p.Close()
	if n, key := e.BelowFloor(); n != 0 {
		t.Fatalf("%d rows below the floor, e.g. %q", n, key)
	}
	// A pass that has not iterated, or read nothing and stopped, does not advance.
	p, _ = e.BeginPass(3_000_000)
	if _, ok := p.AdvanceFloor(0); ok {
		t.Fatal("advanced without iterating")
	}
	p.Close()
}

// TestDueSetF1Randomized checks F1 — every row at or above the floor whenever no pass is open —
// and the order of every pass against a naive model, over random writes and passes. It also
// shows the check bites: a floor pushed past a row by hand is reported.
func TestDueSetF1Randomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	floor := store.NewMemFloor(0)
	d := NewDueSet(floor)
	model := map[string]int64{}
	now := int64(10_000_000)
	for step := range 20_000 {
		switch op := rng.IntN(10); {
		case op < 7: // a result or an unpin: due anywhere from the past to a day ahead
			key := fmt.Sprintf("k%03d", rng.IntN(300))
			due := max(0, now+rng.Int64N(86_400_000)-rng.Int64N(3_600_000))
			if err := d.WriteSchedule(mustSchedule(t, key, due)); err != nil {
				t.Fatal(err)
			}
			model[key] = due
		case op < 9: // a sweep
			keys, _ := iterate(t, d, now, 0, 1+rng.IntN(64))
			var want []string
			for k, due := range model {
				if due <= now && due >= 0 {
					want = append(want, k)
				}
			}
			slices.SortFunc(want, func(a, b string) int {
				return cmp.Or(cmp.Compare(model[a], model[b]), bytes.Compare([]byte(a), []byte(b)))
			})
			// The pass starts at the floor; F1 says nothing lies below it.
			if !slices.Equal(keys, want) {
				t.Fatalf("step %d: pass read %v, want %v", step, keys, want)
			}
			p, _ := d.BeginPass(now)
			_ = p.IterateDue(0, 32, func([]store.DueRow) error { return nil })
			if rng.IntN(3) == 0 { // a write lands while the pass is open
				key := fmt.Sprintf("k%03d", rng.IntN(300))
				due := max(0, now-rng.Int64N(3_600_000))
				_ = d.WriteSchedule(mustSchedule(t, key, due))
				model[key] = due
			}
			p.AdvanceFloor(300_000)
			p.Close()
		default:
			now += rng.Int64N(120_000)
		}
		if n, key := d.BelowFloor(); n > 0 {
			t.Fatalf("step %d: F1 violated: %d rows below the floor %d, e.g. %q", step, n, floor.Load(), key)
		}
	}
	// The check bites: push the floor past the earliest row by hand.
	first := int64(1 << 62)
	for _, due := range model {
		first = min(first, due)
	}
	floor.Advance(floor.Load(), first+1)
	if n, _ := d.BelowFloor(); n == 0 {
		t.Fatal("BelowFloor missed a row stranded below the floor")
	}
}

func TestScanDueIsTheFlooredScan(t *testing.T) {
	d := NewDueSet(store.NewMemFloor(0))
	for i := range 10 {
		_ = d.WriteSchedule(mustSchedule(t, fmt.Sprint("k", i), int64(i)*100_000))
	}
	res, err := d.ScanDue(250_000, 700_000, 3)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range res.Rows {
		keys = append(keys, string(r.Key))
	}
	if !slices.Equal(keys, []string{"k3", "k4", "k5"}) || !res.Capped || res.FirstDueMs != 300_000 {
		t.Fatalf("scan %v %+v", keys, res)
	}
	res, _ = d.ScanDue(250_000, 700_000, 100)
	if len(res.Rows) != 5 || res.Capped || !res.HasNextDue || res.NextDueMs != 800_000 {
		t.Fatalf("uncapped scan: %d rows, %+v", len(res.Rows), res)
	}
	if _, err := d.ScanDue(0, 1, 0); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("limit 0: %v", err)
	}
}
