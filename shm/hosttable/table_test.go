package hosttable

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// The host table: one writer, readers that never keep a torn slot, eviction of the state that
// matters least when a window is full, and host names kept as they were written.
func TestHostTableStoreLoadDelete(t *testing.T) {
	hosts := newTable(t, 4) // window 16 > capacity: one window of 4
	long := strings.Repeat("h", MaxName+40)
	for i, name := range []string{"a.test", "b.test:8080", long} {
		hosts.Store(State{Host: name, PausedUntilMs: int64(100 + i), Limit: uint32(i + 1), Cause: CauseErrors, Status: 503})
	}
	st, ok := hosts.Load(Hash([]byte("b.test:8080")))
	if !ok || st.Host != "b.test:8080" || st.Limit != 2 || st.PausedUntilMs != 101 || st.Status != 503 || st.Cause != CauseErrors {
		t.Fatalf("b.test: %+v %v", st, ok)
	}
	if st, ok := hosts.Load(Hash([]byte(long))); !ok || st.Host != long[:MaxName] {
		t.Fatalf("a long name: %q %v", st.Host, ok)
	}
	hosts.Store(State{Host: "d.test", PausedUntilMs: 50})
	hosts.Store(State{Host: "e.test", PausedUntilMs: 500}) // full: evicts d.test, paused the shortest
	if _, ok := hosts.Load(Hash([]byte("d.test"))); ok {
		t.Fatal("d.test, whose pause ends first, was not the one evicted")
	}
	if _, ok := hosts.Load(Hash([]byte("e.test"))); !ok || hosts.Stats().Evictions != 1 {
		t.Fatalf("e.test not stored, or evictions %d", hosts.Stats().Evictions)
	}
	hosts.Delete(Hash([]byte("a.test")))
	if _, ok := hosts.Load(Hash([]byte("a.test"))); ok {
		t.Fatal("a.test still there after Delete")
	}
	if n := len(hosts.Snapshot()); n != 3 {
		t.Fatalf("snapshot holds %d hosts, want 3", n)
	}
}

// Readers racing the writer see each host's state whole: every field of a stored state is a
// function of one number, and no reader ever loads a mix of two.
func TestHostTableReadersNeverSeeATornSlot(t *testing.T) {
	hosts := newTable(t, 8)
	state := func(n uint64) State {
		return State{Host: fmt.Sprintf("h%d.test", n%7), PausedUntilMs: int64(n), Limit: uint32(n),
			ErrStreak: uint32(n), OKStreak: uint32(n), SinceMs: int64(n), Status: uint16(n)}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				for _, st := range hosts.Snapshot() {
					n := uint64(st.PausedUntilMs)
					if want := state(n); st.Limit != want.Limit || st.SinceMs != want.SinceMs || st.Host != want.Host ||
						st.ErrStreak != want.ErrStreak || st.OKStreak != want.OKStreak || st.Status != want.Status {
						t.Errorf("torn read: %+v", st)
						return
					}
					reads.Add(1)
				}
			}
		}()
	}
	for n := uint64(0); n < 300_000; n++ {
		st := state(n)
		st.Hash = 0
		hosts.Store(st)
		if n%5 == 0 {
			hosts.Delete(Hash([]byte(st.Host)))
		}
	}
	stop.Store(true)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("the readers read nothing: the race was not exercised")
	}
}

// A full window never gives a paused host's slot to a host merely throttled, nor to one paused
// no longer than it: that state is not stored (Store answers false) and nothing is evicted. A
// host paused until later takes the slot of the one paused the shortest.
func TestHostTableNeverEvictsAPausedHostForALesserOne(t *testing.T) {
	hosts := newTable(t, 4)
	for i, name := range []string{"a.test", "b.test", "c.test", "d.test"} {
		if !hosts.Store(State{Host: name, PausedUntilMs: int64(1000 + i*100), Cause: CauseRetryAfter, Status: 429}) {
			t.Fatalf("%s not stored in a table with room", name)
		}
	}
	for _, st := range []State{
		{Host: "throttled.test", Limit: 1, Cause: CauseErrors, Status: 503},
		{Host: "as-long.test", PausedUntilMs: 1000, Cause: CauseRetryAfter, Status: 429},
		{Host: "shorter.test", PausedUntilMs: 999, Cause: CauseRetryAfter, Status: 429},
	} {
		if hosts.Store(st) {
			t.Fatalf("%s took a paused host's slot", st.Host)
		}
		if _, ok := hosts.Load(Hash([]byte(st.Host))); ok {
			t.Fatalf("%s is in the table", st.Host)
		}
	}
	if ev := hosts.Stats().Evictions; ev != 0 {
		t.Fatalf("%d evictions", ev)
	}
	for _, name := range []string{"a.test", "b.test", "c.test", "d.test"} {
		if _, ok := hosts.Load(Hash([]byte(name))); !ok {
			t.Fatalf("%s, paused, was evicted", name)
		}
	}
	if !hosts.Store(State{Host: "later.test", PausedUntilMs: 1001, Cause: CauseRetryAfter, Status: 429}) {
		t.Fatal("a host paused until later was not stored")
	}
	if _, ok := hosts.Load(Hash([]byte("a.test"))); ok || hosts.Stats().Evictions != 1 {
		t.Fatalf("a.test, paused the shortest, was not the one evicted (evictions %d)", hosts.Stats().Evictions)
	}
	// Throttled hosts make room for each other.
	hosts = newTable(t, 2)
	hosts.Store(State{Host: "x.test", Limit: 1})
	hosts.Store(State{Host: "y.test", Limit: 1})
	if !hosts.Store(State{Host: "z.test", Limit: 2}) || hosts.Stats().Evictions != 1 {
		t.Fatal("a throttled host did not take a throttled host's slot")
	}
}

// newTable is a table of capacity slots over ordinary, 8-byte aligned memory.
func newTable(t testing.TB, capacity int) *Table {
	t.Helper()
	words := make([]uint64, (ControlSize+capacity*SlotSize+FarmSharesSize)/8)
	return New(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8), capacity)
}
