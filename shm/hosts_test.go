package shm

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// However many goroutines take a host's slots at once, no more than the limit hold one, and
// every slot given back can be taken again. (Across processes the same holds: a slot is a
// lease, whose one-holder rule TestLeaseAcrossProcesses proves.)
func TestAdmitHostNeverExceedsTheLimit(t *testing.T) {
	seg := newTestSegment(t, Options{LeaseCapacity: 256})
	leases := seg.Leases()
	host := HostHash([]byte("shop.test"))
	const limit, workers, rounds = 3, 8, 2000
	var inside, most, granted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				tok, ok := leases.AdmitHost(host, limit, uint64(w), 2_000_000, 60_000, uint64(w))
				if !ok {
					continue
				}
				granted.Add(1)
				n := inside.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				inside.Add(-1)
				if !leases.Release(tok, 2_000_000, 0) {
					t.Error("a held host slot could not be given back")
					return
				}
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Fatalf("%d holders of a host limited to %d at once", m, limit)
	}
	if granted.Load() < rounds { // the slots were taken and given back, not just refused
		t.Fatalf("only %d of %d attempts were granted", granted.Load(), workers*rounds)
	}
	if n := leases.HostInFlight(host, limit, 2_000_000); n != 0 {
		t.Fatalf("%d slots still held after every holder gave its back", n)
	}
}

// Host slots are leases, but not a holder's leases of rows, and a dead holder's slot lapses.
func TestHostSlotsAreNotRowLeasesAndLapse(t *testing.T) {
	seg := newTestSegment(t, Options{LeaseCapacity: 256})
	leases := seg.Leases()
	host := HostHash([]byte("shop.test"))
	if _, ok := leases.AdmitHost(host, 1, 0, 2_000_000, 1_000, 7); !ok {
		t.Fatal("first slot refused")
	}
	if _, ok := leases.AdmitHost(host, 1, 0, 2_000_000, 1_000, 8); ok {
		t.Fatal("a second slot of a host limited to 1")
	}
	if n := leases.CountHolder(7, 2_000_000); n != 0 {
		t.Fatalf("holder 7 counts %d row leases; it holds only a host slot", n)
	}
	if st := leases.Stats(2_000_000); st.Live != 0 || st.HostSlots != 1 {
		t.Fatalf("stats %+v, want 0 live row leases and 1 host slot", st)
	}
	if _, ok := leases.AdmitHost(host, 1, 0, 2_001_000, 1_000, 8); !ok {
		t.Fatal("the slot of a holder that never gave it back did not lapse at its TTL")
	}
	// A remote's slot is given back by holder; another holder's is left alone.
	if leases.ReleaseHostTokenOf(host, 1, 7, 2_001_000) {
		t.Fatal("released a slot holder 7 does not hold")
	}
	if !leases.ReleaseHostTokenOf(host, 1, 8, 2_001_000) {
		t.Fatal("holder 8's slot was not released")
	}
	if n := leases.HostInFlight(host, 1, 2_001_000); n != 0 {
		t.Fatalf("%d in flight after the release", n)
	}
}

// The host table: one writer, readers that never keep a torn slot, eviction of the state that
// matters least when a window is full, and host names kept as they were written.
func TestHostTableStoreLoadDelete(t *testing.T) {
	seg := newTestSegment(t, Options{HostCapacity: 4}) // window 16 > capacity: one window of 4
	hosts := seg.Hosts()
	long := strings.Repeat("h", MaxHostName+40)
	for i, name := range []string{"a.test", "b.test:8080", long} {
		hosts.Store(HostState{Host: name, PausedUntilMs: int64(100 + i), Limit: uint32(i + 1), Cause: HostCauseErrors, Status: 503})
	}
	st, ok := hosts.Load(HostHash([]byte("b.test:8080")))
	if !ok || st.Host != "b.test:8080" || st.Limit != 2 || st.PausedUntilMs != 101 || st.Status != 503 || st.Cause != HostCauseErrors {
		t.Fatalf("b.test: %+v %v", st, ok)
	}
	if st, ok := hosts.Load(HostHash([]byte(long))); !ok || st.Host != long[:MaxHostName] {
		t.Fatalf("a long name: %q %v", st.Host, ok)
	}
	hosts.Store(HostState{Host: "d.test", PausedUntilMs: 50})
	hosts.Store(HostState{Host: "e.test", PausedUntilMs: 500}) // full: evicts d.test, paused the shortest
	if _, ok := hosts.Load(HostHash([]byte("d.test"))); ok {
		t.Fatal("d.test, whose pause ends first, was not the one evicted")
	}
	if _, ok := hosts.Load(HostHash([]byte("e.test"))); !ok || hosts.Stats().Evictions != 1 {
		t.Fatalf("e.test not stored, or evictions %d", hosts.Stats().Evictions)
	}
	hosts.Delete(HostHash([]byte("a.test")))
	if _, ok := hosts.Load(HostHash([]byte("a.test"))); ok {
		t.Fatal("a.test still there after Delete")
	}
	if n := len(hosts.Snapshot()); n != 3 {
		t.Fatalf("snapshot holds %d hosts, want 3", n)
	}
}

// Readers racing the writer see each host's state whole: every field of a stored state is a
// function of one number, and no reader ever loads a mix of two.
func TestHostTableReadersNeverSeeATornSlot(t *testing.T) {
	seg := newTestSegment(t, Options{HostCapacity: 8})
	hosts := seg.Hosts()
	state := func(n uint64) HostState {
		return HostState{Host: fmt.Sprintf("h%d.test", n%7), PausedUntilMs: int64(n), Limit: uint32(n),
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
			hosts.Delete(HostHash([]byte(st.Host)))
		}
	}
	stop.Store(true)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("the readers read nothing: the race was not exercised")
	}
}

// A restarted worker gives back its dead predecessor's host slots, and no one else's.
func TestReleaseHostSlotsOfADeadHolder(t *testing.T) {
	seg := newTestSegment(t, Options{LeaseCapacity: 256})
	leases := seg.Leases()
	host := HostHash([]byte("shop.test"))
	dead, other := uint64(111)<<16|1, uint64(222)<<16|2
	for _, h := range []uint64{dead, dead, other} {
		if _, ok := leases.AdmitHost(host, 4, h, 2_000_000, 600_000, h); !ok {
			t.Fatal("setup: slot refused")
		}
	}
	row, _ := leases.Acquire(KeyHash([]byte("desktop|https://shop.test/")), 2_000_000, 600_000, dead)
	n := leases.ReleaseHostSlots(2_000_000, func(h uint64) bool { return h&0xffff == 1 && h != uint64(333)<<16|1 })
	if n != 2 {
		t.Fatalf("released %d host slots, want the dead holder's 2", n)
	}
	if in := leases.HostInFlight(host, 4, 2_000_000); in != 1 {
		t.Fatalf("%d slots held after, want worker 2's 1", in)
	}
	if err := leases.Check(row, row.KeyHash, 2_000_000); err != nil {
		t.Fatalf("the dead holder's row lease was touched: %v", err)
	}
}

// A full window never gives a paused host's slot to a host merely throttled, nor to one paused
// no longer than it: that state is not stored (Store answers false) and nothing is evicted. A
// host paused until later takes the slot of the one paused the shortest.
func TestHostTableNeverEvictsAPausedHostForALesserOne(t *testing.T) {
	seg := newTestSegment(t, Options{HostCapacity: 4})
	hosts := seg.Hosts()
	for i, name := range []string{"a.test", "b.test", "c.test", "d.test"} {
		if !hosts.Store(HostState{Host: name, PausedUntilMs: int64(1000 + i*100), Cause: HostCauseRetryAfter, Status: 429}) {
			t.Fatalf("%s not stored in a table with room", name)
		}
	}
	for _, st := range []HostState{
		{Host: "throttled.test", Limit: 1, Cause: HostCauseErrors, Status: 503},
		{Host: "as-long.test", PausedUntilMs: 1000, Cause: HostCauseRetryAfter, Status: 429},
		{Host: "shorter.test", PausedUntilMs: 999, Cause: HostCauseRetryAfter, Status: 429},
	} {
		if hosts.Store(st) {
			t.Fatalf("%s took a paused host's slot", st.Host)
		}
		if _, ok := hosts.Load(HostHash([]byte(st.Host))); ok {
			t.Fatalf("%s is in the table", st.Host)
		}
	}
	if ev := hosts.Stats().Evictions; ev != 0 {
		t.Fatalf("%d evictions", ev)
	}
	for _, name := range []string{"a.test", "b.test", "c.test", "d.test"} {
		if _, ok := hosts.Load(HostHash([]byte(name))); !ok {
			t.Fatalf("%s, paused, was evicted", name)
		}
	}
	if !hosts.Store(HostState{Host: "later.test", PausedUntilMs: 1001, Cause: HostCauseRetryAfter, Status: 429}) {
		t.Fatal("a host paused until later was not stored")
	}
	if _, ok := hosts.Load(HostHash([]byte("a.test"))); ok || hosts.Stats().Evictions != 1 {
		t.Fatalf("a.test, paused the shortest, was not the one evicted (evictions %d)", hosts.Stats().Evictions)
	}
	// Throttled hosts make room for each other.
	seg = newTestSegment(t, Options{HostCapacity: 2})
	hosts = seg.Hosts()
	hosts.Store(HostState{Host: "x.test", Limit: 1})
	hosts.Store(HostState{Host: "y.test", Limit: 1})
	if !hosts.Store(HostState{Host: "z.test", Limit: 2}) || hosts.Stats().Evictions != 1 {
		t.Fatal("a throttled host did not take a throttled host's slot")
	}
}
