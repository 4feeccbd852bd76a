package badgerstore

import (
	"testing"

	"github.com/freshq/freshq/store"
)

// A pass that stopped before observing any row knows no minimum and must not advance.
func TestAdvanceFloorRefusesBlindPass(t *testing.T) {
	st := openTest(t, nil)
	fill(t, st, 5, 100, 1)
	rawSet(t, st, dueKey(50, []byte("x")), []byte{0}) // corrupt: the first entry fails
	p, _ := st.BeginPass(1000)
	defer p.Close()
	if err := p.IterateDue(0, 1, func([]store.DueRow) error { return nil }); err == nil {
		t.Fatal("iteration over a corrupt entry succeeded")
	}
	if _, ok := p.AdvanceFloor(0); ok {
		t.Fatal("a pass that observed nothing advanced the floor")
	}
}

func TestFloorIsTheConfiguredCell(t *testing.T) {
	f := store.NewMemFloor(10_000)
	if st := openTest(t, &Options{Floor: f}); st.Floor() != store.FloorCell(f) {
		t.Fatal("Floor() is not the configured cell")
	}
}
