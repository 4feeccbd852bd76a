package sweeploop

import (
	"errors"
	"testing"

	"github.com/freshq/freshq/store"
)

// countingStore answers RowsBelowFloor with n (or err) and counts the calls.
type countingStore struct {
	store.Store
	n, calls int
	err      error
}

func (c *countingStore) RowsBelowFloor(int) (int, error) {
	c.calls++
	return c.n, c.err
}

// The alarm counts after the first sweep, then at most once per belowFloorEvery of the injected
// clock, and again at once if the clock goes back.
func TestBelowFloorAlarmCountsOncePerInterval(t *testing.T) {
	st := &countingStore{n: 3}
	a := NewBelowFloorAlarm(st)
	every := belowFloorEvery.Milliseconds()
	steps := []struct {
		nowMs   int64
		counted bool
	}{
		{1_000_000, true},              // the first sweep
		{1_000_000, false},             // a sweep at the same time
		{1_000_000 + every - 1, false}, // just short of the interval
		{1_000_000 + every, true},      // the interval has passed
		{1_000_000 + every + 1, false},
		{999_000, true}, // the clock went back
		{999_001, false},
	}
	calls := 0
	for i, s := range steps {
		n, counted := a.AfterSweep(s.nowMs)
		if counted != s.counted {
			t.Fatalf("step %d at %d: counted %v, want %v", i, s.nowMs, counted, s.counted)
		}
		if counted {
			calls++
			if n != 3 {
				t.Fatalf("step %d: %d rows below the floor, want 3", i, n)
			}
		}
		if st.calls != calls {
			t.Fatalf("step %d: the store was asked %d times, want %d", i, st.calls, calls)
		}
	}
}

// A count that fails reports 0 rows, counted: the gauge is not left at an old alarm.
func TestBelowFloorAlarmFailedCountIsZero(t *testing.T) {
	a := NewBelowFloorAlarm(&countingStore{n: 5, err: errors.New("no database")})
	if n, counted := a.AfterSweep(1); n != 0 || !counted {
		t.Fatalf("a failed count gave %d rows, counted %v; want 0, true", n, counted)
	}
}
