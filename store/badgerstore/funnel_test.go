package badgerstore

import (
	"strings"
	"testing"

	"github.com/freshq/freshq/store"
)

func TestNewScheduleValidates(t *testing.T) {
	for _, c := range []struct {
		key  []byte
		due  int64
		eff  int64
		want error
	}{
		{nil, 1, 0, store.ErrEmptyKey},
		{[]byte(strings.Repeat("x", store.MaxKeyLen+1)), 1, 0, store.ErrKeyTooLong},
		{[]byte("k"), -1, 0, store.ErrNegativeDue},
		{[]byte("k"), 1, -1, store.ErrNegativeInterval},
	} {
		if _, err := store.NewSchedule(c.key, c.due, false, c.eff, store.Lanes{}); !isErr(err, c.want) {
			t.Errorf("NewSchedule(len %d, %d, %d): %v, want %v", len(c.key), c.due, c.eff, err, c.want)
		}
	}
	long := []byte(strings.Repeat("x", store.MaxKeyLen))
	s, err := store.NewSchedule(long, 0, true, 0, store.Lanes{})
	if err != nil {
		t.Fatalf("a key of exactly MaxKeyLen: %v", err)
	}
	long[0] = 'y'
	if s.Key()[0] != 'x' {
		t.Fatal("NewSchedule did not copy its key")
	}
	if s.DueAtMs() != 0 || !s.Submitted() || s.EffectiveIntervalMs() != 0 || s.Lanes() != (store.Lanes{}) {
		t.Fatalf("accessors: %+v", s)
	}
}

// A call far larger than one Badger transaction is cut into several; each write stays whole.
func TestFunnelSplitsLargeCalls(t *testing.T) {
	st := openTest(t, &Options{MemTableSize: 1 << 20}) // ~150 KB per transaction
	const n = 6000
	ws := make([]store.Write, 0, n)
	for i := range n {
		tg := sampleTarget()
		ws = append(ws, store.Write{Schedule: mustSchedule(t, urlKey(i%4000), int64(i), true, 1, store.Lanes{}), Target: &tg})
	}
	mustWrite(t, st, ws...)
	if rep := mustVerify(t, st); rep.Rows != 4000 || rep.Entries != 4000 {
		t.Fatalf("%+v", rep)
	}
	for i := 4000; i < n; i++ {
		if r, err := st.GetSchedule([]byte(urlKey(i % 4000))); err != nil || r.DueAtMs != int64(i) {
			t.Fatalf("key %d: %+v %v", i%4000, r, err)
		}
	}
}

func TestFunnelCorruptRowIsReported(t *testing.T) {
	st := openTest(t, nil)
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, "good", 1, false, 0, store.Lanes{})})
	rawSet(t, st, scheduleKey([]byte("bad")), []byte{0xde, 0xad})
	err := st.WriteSchedules([]store.Write{
		{Schedule: mustSchedule(t, "bad", 5, false, 0, store.Lanes{})},
		{Schedule: mustSchedule(t, "good", 6, false, 0, store.Lanes{})},
	})
	if !store.IsCorruptionError(err) {
		t.Fatalf("write over a corrupt row: %v", err)
	}
	// The other write of the call still committed, whole.
	if r, err := st.GetSchedule([]byte("good")); err != nil || r.DueAtMs != 6 {
		t.Fatalf("neighbour write: %+v %v", r, err)
	}
	if _, err := st.GetSchedule([]byte("bad")); !store.IsCorruptionError(err) {
		t.Fatalf("get of a corrupt row: %v", err)
	}
	if err := st.DeleteTarget([]byte("bad")); !store.IsCorruptionError(err) {
		t.Fatalf("delete of a corrupt row: %v", err)
	}
	rep, err := st.VerifyIndex()
	if err != nil || rep.Corrupt != 1 || rep.OK() {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
