package storetest

import (
	"errors"
	"testing"

	"github.com/freshq/freshq/store"
)

// checkRowFloors fails t if a row of keys is due below the floor that bounds it.
func checkRowFloors(t testing.TB, st store.Store, keys ...string) {
	t.Helper()
	floorOf := backdoor(t, st).Floors(t)
	for _, k := range keys {
		r, err := st.GetSchedule([]byte(k))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if f := floorOf([]byte(k)); r.DueAtMs < f {
			t.Fatalf("row %s due %d below its floor %d", k, r.DueAtMs, f)
		}
	}
}

func testWritesLowerTheFloor(t *testing.T, open Opener) {
	f := store.NewMemFloor(0)
	st := open(t, Options{Floor: f})
	p := RunPass(t, st, 10_000) // nothing due: the floor rises to now
	p.AdvanceFloor(0)
	p.Close()
	if f.Load() != 10_000 {
		t.Fatalf("setup: floor %d, want 10000", f.Load())
	}
	mustWrite(t, st, put(t, "a", 20_000))
	if f.Load() != 10_000 {
		t.Fatalf("a write above the floor moved it to %d", f.Load())
	}
	mustWrite(t, st, put(t, "b", 7_000), put(t, "c", 3_000))
	if f.Load() != 3_000 {
		t.Fatalf("floor %d after writes at 7000 and 3000, want 3000", f.Load())
	}
	checkRowFloors(t, st, "a", "b", "c")
	if err := st.DeleteTarget([]byte("c")); err != nil || f.Load() != 3_000 {
		t.Fatalf("a delete moved the floor: %d %v", f.Load(), err)
	}
	// Modify lowers the floor too, before it decides.
	_, err := st.Modify([]store.Change{{Key: []byte("d"), MinDueMs: 2_000, Decide: func(store.Current) (store.Write, bool, error) {
		return put(t, "d", 2_500), true, nil
	}}})
	if err != nil || f.Load() > 2_000 {
		t.Fatalf("after a Modify with MinDueMs 2000: floor %d, %v", f.Load(), err)
	}
	checkRowFloors(t, st, "d")
}

func testAdvanceFloorBounds(t *testing.T, open Opener) {
	f := store.NewMemFloor(0)
	st := open(t, Options{Floor: f})
	const guard = 300

	// Nothing due: the bound is now − guard.
	p := RunPass(t, st, 10_000)
	if fl, ok := p.AdvanceFloor(guard); !ok || fl != 10_000-guard {
		t.Fatalf("empty index: floor %d %v", fl, ok)
	}
	p.Close()
	if fl, ok := p.AdvanceFloor(guard); ok || fl != 10_000-guard {
		t.Fatalf("advance after close: %d %v", fl, ok)
	}

	// Rows due: the bound is the first due row − guard, never now − guard.
	keys := fill(t, st, 10, 12_000, 100) // above the floor: it stays
	p = RunPass(t, st, 20_000)
	if fl, ok := p.AdvanceFloor(guard); !ok || fl != 12_000-guard {
		t.Fatalf("rows due: floor %d %v, want %d", fl, ok, 12_000-guard)
	}
	// A pass advances at most once: a second advance of it is a no-op.
	if fl, ok := p.AdvanceFloor(0); ok || fl != 12_000-guard {
		t.Fatalf("second advance of one pass: floor %d, moved %v", fl, ok)
	}
	p.Close()
	checkRowFloors(t, st, keys...)

	// A row in the future, nothing due: bounded by now, not by the future row.
	st2 := open(t, Options{Floor: store.NewMemFloor(0)})
	mustWrite(t, st2, put(t, "future", 50_000))
	p = RunPass(t, st2, 20_000)
	if fl, ok := p.AdvanceFloor(guard); !ok || fl != 20_000-guard || p.Stats().NextDueMs != 50_000 {
		t.Fatalf("future row: floor %d %v %+v", fl, ok, p.Stats())
	}
	p.Close()
	checkRowFloors(t, st2, "future")

	// Not iterated, negative guard, bound not above the floor: no advance.
	p, _ = st.BeginPass(20_000)
	if _, ok := p.AdvanceFloor(guard); ok {
		t.Fatal("advance without iterating")
	}
	_ = p.IterateDue(0, 1, func([]store.DueRow) error { return nil })
	if _, ok := p.AdvanceFloor(-1); ok {
		t.Fatal("advance with a negative guard")
	}
	if _, ok := p.AdvanceFloor(guard); ok {
		t.Fatal("advance to the floor it already has")
	}
	p.Close()
}

// A pass whose iteration stopped early (its callback refused the first chunk) advances no
// further than the first due row; one whose iteration was refused does not advance at all.
func testAdvanceFloorAfterStoppedPass(t *testing.T, open Opener) {
	f := store.NewMemFloor(0)
	st := open(t, Options{Floor: f})
	keys := fill(t, st, 5, 100, 1)
	p, _ := st.BeginPass(1000)
	if err := p.IterateDue(0, 0, nil); !isErr(err, store.ErrInvalidArgument) {
		t.Fatalf("chunk 0: %v", err)
	}
	if _, ok := p.AdvanceFloor(0); ok {
		t.Fatal("a pass whose iteration was refused advanced the floor")
	}
	p.Close()
	stop := errors.New("stop")
	p, _ = st.BeginPass(1000)
	if err := p.IterateDue(0, 1, func([]store.DueRow) error { return stop }); err != stop {
		t.Fatalf("stopped iteration: %v", err)
	}
	if fl, _ := p.AdvanceFloor(0); fl > 100 || f.Load() > 100 {
		t.Fatalf("a stopped pass advanced the floor to %d (cell %d), past the first row at 100", fl, f.Load())
	}
	p.Close()
	checkRowFloors(t, st, keys...)
}

// A write in flight when the pass takes its snapshot is invisible to the pass, but bounds its
// advance. The committer is held between lowering the floor and committing; the advance runs
// on its own goroutine, because a backend may make it wait for the write (PostgreSQL's row
// locks do) where another counts the write in flight and returns at once (Badger).
func testAdvanceFloorCountsWriteInFlight(t *testing.T, open Opener) {
	f := store.NewMemFloor(0)
	var hold Hook
	st := open(t, Options{Floor: f, TestSignals: store.TestSignals{BeforeCommit: hold.Run}})
	fill(t, st, 5, 9_000, 1)
	p := RunPass(t, st, 10_000)
	if fl, ok := p.AdvanceFloor(100); !ok || fl != 8_900 {
		t.Fatalf("setup: %d %v", fl, ok)
	}
	p.Close()

	held, release := make(chan struct{}), make(chan struct{})
	hold.Set(func() { close(held); <-release })
	done := make(chan error, 1)
	go func() { done <- st.WriteSchedule(mustSchedule(t, "old", 1_000, false, 0, store.Lanes{})) }()
	<-held // the floor is lowered for the write; nothing committed
	hold.Set(nil)
	if f.Load() != 1_000 {
		t.Fatalf("floor %d while the write is in flight, want 1000", f.Load())
	}
	p = RunPass(t, st, 20_000)
	if p.Stats().FirstDueMs != 9_000 {
		t.Fatalf("the pass saw the uncommitted write: %+v", p.Stats())
	}
	type advance struct {
		floor int64
		moved bool
	}
	advanced := make(chan advance, 1)
	go func() { fl, ok := p.AdvanceFloor(100); advanced <- advance{fl, ok} }()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	a := <-advanced
	if a.floor > 1_000 || f.Load() > 1_000 {
		t.Fatalf("advanced to %d (cell %d) past the write in flight at 1000", a.floor, f.Load())
	}
	p.Close()
	checkRowFloors(t, st, "old")

	// A write filed after the snapshot bounds the advance too.
	p, _ = st.BeginPass(30_000)
	mustWrite(t, st, put(t, "later", 500))
	_ = p.IterateDue(0, 64, func([]store.DueRow) error { return nil })
	if fl, _ := p.AdvanceFloor(0); fl > 500 || f.Load() > 500 {
		t.Fatalf("after a later write at 500: floor %d (cell %d)", fl, f.Load())
	}
	p.Close()
	checkRowFloors(t, st, "old", "later")
	// A write filed after the snapshot, above the observed floor, does not lower the floor;
	// the advance is still bounded by it, though the pass never saw it.
	for _, k := range []string{"old", "later"} {
		if err := st.DeleteTarget([]byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	p, _ = st.BeginPass(30_000) // observes floor 500; first due row is 9000
	mustWrite(t, st, put(t, "later2", 700))
	_ = p.IterateDue(0, 64, func([]store.DueRow) error { return nil })
	if p.Stats().FirstDueMs != 9_000 {
		t.Fatalf("setup: %+v", p.Stats())
	}
	if fl, ok := p.AdvanceFloor(0); !ok || fl != 700 {
		t.Fatalf("floor %d advanced %v, want 700 (the unseen write), not 9000", fl, ok)
	}
	p.Close()
	checkRowFloors(t, st, "later2")
}

// The head follows the floor's protocol without the guard: a pass moves it to the first due
// row (or now), a write lowers it, and it never reads below the floor.
func testHeadIsTheFloorWithoutItsGuard(t *testing.T, open Opener) {
	f := store.NewMemFloor(0)
	st := open(t, Options{Floor: f})
	p := RunPass(t, st, 2_000)
	p.AdvanceFloor(1_000)
	p.Close()
	if st.HeadMs() != 2_000 || f.Load() != 1_000 {
		t.Fatalf("empty store after a pass at 2000, guard 1000: head %d, floor %d", st.HeadMs(), f.Load())
	}
	fill(t, st, 5, 50_000, 10) // due 50000..50040
	p = RunPass(t, st, 100_000)
	if floor, ok := p.AdvanceFloor(5_000); !ok || floor != 45_000 || st.HeadMs() != 50_000 {
		t.Fatalf("after a pass: floor %d (moved %v), head %d; want 45000 and 50000", floor, ok, st.HeadMs())
	}
	p.Close()
	mustWrite(t, st, put(t, "late", 47_000))
	if st.HeadMs() != 47_000 || f.Load() != 45_000 {
		t.Fatalf("a write at 47000 left head %d, floor %d", st.HeadMs(), f.Load())
	}
	mustWrite(t, st, put(t, "later", 2_000))
	if st.HeadMs() != 2_000 || f.Load() != 2_000 {
		t.Fatalf("a write at 2000 left head %d, floor %d", st.HeadMs(), f.Load())
	}
	// A scan from the head sees every due row from there, and the first one is at the head.
	p = RunPass(t, st, 100_000)
	p.AdvanceFloor(5_000)
	p.Close()
	res, err := st.ScanDue(st.HeadMs(), 100_000, 100)
	if err != nil || len(res.Rows) != 7 || res.FirstDueMs != st.HeadMs() {
		t.Fatalf("scan from head %d: %d rows, first %d, %v", st.HeadMs(), len(res.Rows), res.FirstDueMs, err)
	}
	// The protocol keeps the head at or above the floor; should the cell (shared memory)
	// ever read above it, HeadMs still never reads below the floor.
	if !f.Advance(f.Load(), 3_000) || st.HeadMs() < 3_000 {
		t.Fatalf("head %d below the floor %d", st.HeadMs(), f.Load())
	}
}
