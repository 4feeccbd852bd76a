package store

import "testing"

func TestMemFloor(t *testing.T) {
	var zero MemFloor
	if zero.Load() != 0 {
		t.Fatal("zero MemFloor is not at 0")
	}
	f := NewMemFloor(100)
	if f.Lower(100) || f.Lower(150) || f.Load() != 100 {
		t.Fatal("Lower to a value not below the floor changed it")
	}
	if !f.Lower(40) || f.Load() != 40 {
		t.Fatal("Lower below the floor did not lower it")
	}
	if f.Advance(39, 50) || f.Load() != 40 {
		t.Fatal("Advance from a stale observation succeeded")
	}
	if f.Advance(40, 40) || f.Advance(40, 30) {
		t.Fatal("Advance to a value not above the observed one succeeded")
	}
	if !f.Advance(40, 60) || f.Load() != 60 {
		t.Fatal("Advance from the current value failed")
	}
}

func TestWritesLowerTheFloor(t *testing.T) {
	f := NewMemFloor(10_000)
	st := openTest(t, &Options{Floor: f})
	mustWrite(t, st, Write{Schedule: mustSchedule(t, "a", 20_000, false, 0, Lanes{})})
	if f.Load() != 10_000 {
		t.Fatalf("a write above the floor moved it to %d", f.Load())
	}
	mustWrite(t, st,
		Write{Schedule: mustSchedule(t, "b", 7_000, false, 0, Lanes{})},
		Write{Schedule: mustSchedule(t, "c", 3_000, false, 0, Lanes{})})
	if f.Load() != 3_000 {
		t.Fatalf("floor %d after writes at 7000 and 3000, want 3000", f.Load())
	}
	if err := st.DeleteTarget([]byte("c")); err != nil || f.Load() != 3_000 {
		t.Fatalf("a delete moved the floor: %d %v", f.Load(), err)
	}
	if st.Floor() != FloorCell(f) {
		t.Fatal("Floor() is not the configured cell")
	}
}

func runPass(t *testing.T, st *Badger, now int64) Pass {
	t.Helper()
	p, err := st.BeginPass(now)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.IterateDue(0, 64, func([]DueRow) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAdvanceFloorBounds(t *testing.T) {
	f := NewMemFloor(0)
	st := openTest(t, &Options{Floor: f})
	const guard = 300

	// Nothing due: the bound is now − guard.
	p := runPass(t, st, 10_000)
	if fl, ok := p.AdvanceFloor(guard); !ok || fl != 10_000-guard {
		t.Fatalf("empty index: floor %d %v", fl, ok)
	}
	p.Close()
	if fl, ok := p.AdvanceFloor(guard); ok || fl != 10_000-guard {
		t.Fatalf("advance after close: %d %v", fl, ok)
	}

	// Rows due: the bound is the first due row − guard, never now − guard.
	fill(t, st, 10, 12_000, 100) // lowers the floor to 12000? No: 12000 > floor, unchanged.
	p = runPass(t, st, 20_000)
	if fl, ok := p.AdvanceFloor(guard); !ok || fl != 12_000-guard {
		t.Fatalf("rows due: floor %d %v, want %d", fl, ok, 12_000-guard)
	}
	// A second advance of the same pass is a no-op: the CAS is from the observed value.
	if _, ok := p.AdvanceFloor(0); ok {
		t.Fatal("second advance of one pass succeeded")
	}
	p.Close()

	// A row in the future, nothing due: bounded by now, not by the future row.
	st2 := openTest(t, &Options{Floor: NewMemFloor(0)})
	mustWrite(t, st2, Write{Schedule: mustSchedule(t, "future", 50_000, false, 0, Lanes{})})
	p = runPass(t, st2, 20_000)
	if fl, ok := p.AdvanceFloor(guard); !ok || fl != 20_000-guard || p.Stats().NextDueMs != 50_000 {
		t.Fatalf("future row: floor %d %v %+v", fl, ok, p.Stats())
	}
	p.Close()

	// Not iterated, negative guard, bound not above the floor: no advance.
	p, _ = st.BeginPass(20_000)
	if _, ok := p.AdvanceFloor(guard); ok {
		t.Fatal("advance without iterating")
	}
	_ = p.IterateDue(0, 1, func([]DueRow) error { return nil })
	if _, ok := p.AdvanceFloor(-1); ok {
		t.Fatal("advance with a negative guard")
	}
	if _, ok := p.AdvanceFloor(guard); ok {
		t.Fatal("advance to the floor it already has")
	}
	p.Close()
}

// A pass that stopped before observing any row knows no minimum and must not advance.
func TestAdvanceFloorRefusesBlindPass(t *testing.T) {
	st := openTest(t, nil)
	fill(t, st, 5, 100, 1)
	rawSet(t, st, dueKey(50, []byte("x")), []byte{0}) // corrupt: the first entry fails
	p, _ := st.BeginPass(1000)
	defer p.Close()
	if err := p.IterateDue(0, 1, func([]DueRow) error { return nil }); err == nil {
		t.Fatal("iteration over a corrupt entry succeeded")
	}
	if _, ok := p.AdvanceFloor(0); ok {
		t.Fatal("a pass that observed nothing advanced the floor")
	}
}

// A write in flight when the pass takes its snapshot is invisible to the pass, but bounds its
// advance. The committer is held between lowering the floor and committing.
func TestAdvanceFloorCountsWriteInFlight(t *testing.T) {
	f := NewMemFloor(0)
	st := openTest(t, &Options{Floor: f})
	fill(t, st, 5, 9_000, 1)
	p := runPass(t, st, 10_000)
	if fl, ok := p.AdvanceFloor(100); !ok || fl != 8_900 {
		t.Fatalf("setup: %d %v", fl, ok)
	}
	p.Close()

	held, release := make(chan struct{}), make(chan struct{})
	st.opts.TestSignals.BeforeCommit = func() { close(held); <-release }
	done := make(chan error)
	go func() {
		s, _ := NewSchedule([]byte("old"), 1_000, false, 0, Lanes{})
		done <- st.WriteSchedule(s)
	}()
	<-held // the batch is registered and the floor lowered; nothing committed
	if f.Load() != 1_000 {
		t.Fatalf("floor %d while the write is in flight, want 1000", f.Load())
	}
	p = runPass(t, st, 20_000)
	if p.Stats().FirstDueMs != 9_000 {
		t.Fatalf("the pass saw the uncommitted write: %+v", p.Stats())
	}
	fl, ok := p.AdvanceFloor(100)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st.opts.TestSignals.BeforeCommit = nil
	if ok && fl > 1_000 {
		t.Fatalf("advanced to %d past the write in flight at 1000", fl)
	}
	if f.Load() > 1_000 {
		t.Fatalf("floor %d above the committed row at 1000", f.Load())
	}
	p.Close()

	// A write registered after the snapshot bounds the advance too.
	p, _ = st.BeginPass(30_000)
	mustWrite(t, st, Write{Schedule: mustSchedule(t, "later", 500, false, 0, Lanes{})})
	_ = p.IterateDue(0, 64, func([]DueRow) error { return nil })
	if fl, ok := p.AdvanceFloor(0); ok || fl != 500 {
		// The write lowered the floor to 500 after the pass observed 1000: the CAS loses.
		t.Fatalf("after a later write: floor %d advanced %v", fl, ok)
	}
	p.Close()
	// A write registered after the snapshot, above the observed floor, does not lower the
	// floor; the advance is still bounded by it, though the pass never saw it.
	for _, k := range []string{"old", "later"} {
		if err := st.DeleteTarget([]byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	p, _ = st.BeginPass(30_000) // observes floor 500; first due row is 9000
	mustWrite(t, st, Write{Schedule: mustSchedule(t, "later2", 700, false, 0, Lanes{})})
	_ = p.IterateDue(0, 64, func([]DueRow) error { return nil })
	if p.Stats().FirstDueMs != 9_000 {
		t.Fatalf("setup: %+v", p.Stats())
	}
	if fl, ok := p.AdvanceFloor(0); !ok || fl != 700 {
		t.Fatalf("floor %d advanced %v, want 700 (the unseen write), not 9000", fl, ok)
	}
	p.Close()
}

// The head follows the floor's protocol without the guard: a pass moves it to the first due
// row it observed, a write lowers it, and it never reads below the floor.
func TestHeadIsTheFloorWithoutItsGuard(t *testing.T) {
	f := NewMemFloor(1_000)
	st := openTest(t, &Options{Floor: f})
	if st.HeadMs() != 1_000 {
		t.Fatalf("head %d at open, want the floor 1000", st.HeadMs())
	}
	fill(t, st, 5, 50_000, 10) // due 50000..50040
	p := runPass(t, st, 100_000)
	if floor, ok := p.AdvanceFloor(5_000); !ok || floor != 45_000 || st.HeadMs() != 50_000 {
		t.Fatalf("after a pass: floor %d (moved %v), head %d; want 45000 and 50000", floor, ok, st.HeadMs())
	}
	p.Close()
	mustWrite(t, st, Write{Schedule: mustSchedule(t, "late", 47_000, false, 0, Lanes{})})
	if st.HeadMs() != 47_000 || f.Load() != 45_000 {
		t.Fatalf("a write at 47000 left head %d, floor %d", st.HeadMs(), f.Load())
	}
	mustWrite(t, st, Write{Schedule: mustSchedule(t, "later", 2_000, false, 0, Lanes{})})
	if st.HeadMs() != 2_000 || f.Load() != 2_000 {
		t.Fatalf("a write at 2000 left head %d, floor %d", st.HeadMs(), f.Load())
	}
	// The protocol keeps the head at or above the floor; should the cell (shared memory) ever
	// read above it, HeadMs still never reads below the floor.
	f.v.Store(3_000)
	if st.HeadMs() != 3_000 {
		t.Fatalf("head %d below the floor 3000", st.HeadMs())
	}
	// A scan from the head sees every due row from there, and the first one is at the head.
	p = runPass(t, st, 100_000)
	p.AdvanceFloor(5_000)
	p.Close()
	res, err := st.ScanDue(st.HeadMs(), 100_000, 100)
	if err != nil || len(res.Rows) != 6 || res.FirstDueMs != st.HeadMs() {
		t.Fatalf("scan from head %d: %d rows, first %d, %v", st.HeadMs(), len(res.Rows), res.FirstDueMs, err)
	}
}
