package badgerstore

import (
	"errors"
	"testing"

	"github.com/freshq/freshq/store"
)

// A call that fails after some of its writes committed says which did: a caller that acts
// once per durable write (worker 0 releases a result's lease) must not take the error for
// "nothing written".
func TestWriteSchedulesReportsWhichWritesCommitted(t *testing.T) {
	st := openTest(t, nil)
	rawSet(t, st, scheduleKey([]byte("bad")), []byte{0xde, 0xad})
	err := st.WriteSchedules([]store.Write{
		{Schedule: mustSchedule(t, "good-1", 5, false, 0, store.Lanes{})},
		{Schedule: mustSchedule(t, "bad", 5, false, 0, store.Lanes{})},
		{Schedule: mustSchedule(t, "good-2", 6, false, 0, store.Lanes{})},
	})
	var pe *store.PartialWriteError
	if !errors.As(err, &pe) || !store.IsCorruptionError(err) {
		t.Fatalf("%v: want a *PartialWriteError wrapping the corruption", err)
	}
	if want := []bool{true, false, true}; len(pe.Committed) != 3 || pe.Committed[0] != want[0] || pe.Committed[1] != want[1] || pe.Committed[2] != want[2] {
		t.Fatalf("committed %v, want %v", pe.Committed, want)
	}
	// A call of which nothing committed keeps its plain error.
	err = st.WriteSchedules([]store.Write{{Schedule: mustSchedule(t, "bad", 7, false, 0, store.Lanes{})}})
	if errors.As(err, &pe) || !store.IsCorruptionError(err) {
		t.Fatalf("nothing committed: %v", err)
	}
}
