package hosts

import (
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/shm"
)

// tokenSegment is a segment with room for the tokens these tests take.
func tokenSegment(t testing.TB) *shm.Segment {
	t.Helper()
	seg, err := shm.Create(filepath.Join(t.TempDir(), "seg"), shm.Options{LeaseCapacity: 256, EpochMs: 1_000_000})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { seg.Close() })
	return seg
}

// However many goroutines take a host's slots at once, no more than the limit hold one, and
// every slot given back can be taken again. (Across processes the same holds: a slot is a
// lease, whose one-holder rule shm.TestMultiProcessReadyAndLeases proves.)
func TestAdmitTokenNeverExceedsTheLimit(t *testing.T) {
	seg := tokenSegment(t)
	leases := seg.Leases()
	host := shm.HostHash([]byte("shop.test"))
	const limit, workers, rounds = 3, 8, 2000
	var inside, most, granted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				tok, ok := AdmitToken(leases, host, limit, uint64(w), 2_000_000, 60_000, uint64(w))
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
	if n := InFlight(leases, host, limit, 2_000_000); n != 0 {
		t.Fatalf("%d slots still held after every holder gave its back", n)
	}
}

// Host slots are leases, but not a holder's leases of rows, and a dead holder's slot lapses.
func TestHostSlotsAreNotRowLeasesAndLapse(t *testing.T) {
	seg := tokenSegment(t)
	leases := seg.Leases()
	host := shm.HostHash([]byte("shop.test"))
	if _, ok := AdmitToken(leases, host, 1, 0, 2_000_000, 1_000, 7); !ok {
		t.Fatal("first slot refused")
	}
	if _, ok := AdmitToken(leases, host, 1, 0, 2_000_000, 1_000, 8); ok {
		t.Fatal("a second slot of a host limited to 1")
	}
	if n := leases.CountHolder(7, 2_000_000); n != 0 {
		t.Fatalf("holder 7 counts %d row leases; it holds only a host slot", n)
	}
	if st := leases.Stats(2_000_000); st.Live != 0 || st.HostSlots != 1 {
		t.Fatalf("stats %+v, want 0 live row leases and 1 host slot", st)
	}
	if _, ok := AdmitToken(leases, host, 1, 0, 2_001_000, 1_000, 8); !ok {
		t.Fatal("the slot of a holder that never gave it back did not lapse at its TTL")
	}
	// A remote's slot is given back by holder; another holder's is left alone.
	if ReleaseTokenOf(leases, host, 1, 7, 2_001_000) {
		t.Fatal("released a slot holder 7 does not hold")
	}
	if !ReleaseTokenOf(leases, host, 1, 8, 2_001_000) {
		t.Fatal("holder 8's slot was not released")
	}
	if n := InFlight(leases, host, 1, 2_001_000); n != 0 {
		t.Fatalf("%d in flight after the release", n)
	}
}

// A restarted worker gives back its dead predecessor's host slots, and no one else's.
func TestReleaseTokensOfADeadHolder(t *testing.T) {
	seg := tokenSegment(t)
	leases := seg.Leases()
	host := shm.HostHash([]byte("shop.test"))
	dead, other := uint64(111)<<16|1, uint64(222)<<16|2
	for _, h := range []uint64{dead, dead, other} {
		if _, ok := AdmitToken(leases, host, 4, h, 2_000_000, 600_000, h); !ok {
			t.Fatal("setup: slot refused")
		}
	}
	row, _ := leases.Acquire(shm.KeyHash([]byte("desktop|https://shop.test/")), 2_000_000, 600_000, dead)
	n := ReleaseTokens(leases, 2_000_000, func(h uint64) bool { return h&0xffff == 1 && h != uint64(333)<<16|1 })
	if n != 2 {
		t.Fatalf("released %d host slots, want the dead holder's 2", n)
	}
	if in := InFlight(leases, host, 4, 2_000_000); in != 1 {
		t.Fatalf("%d slots held after, want worker 2's 1", in)
	}
	if err := leases.Check(row, row.KeyHash, 2_000_000); err != nil {
		t.Fatalf("the dead holder's row lease was touched: %v", err)
	}
}

// A render worker that starts gives back the host slots of its index's earlier incarnations,
// and no one else's: not another index's, not its own, not a remote renderer's, not a hold's.
func TestReleaseEarlierIncarnations(t *testing.T) {
	seg := tokenSegment(t)
	leases := seg.Leases()
	host := shm.HostHash([]byte("shop.test"))
	dead, me, other, remote := uint64(111)<<16|1, uint64(333)<<16|1, uint64(222)<<16|2, uint64(1)<<63|1
	for _, h := range []uint64{dead, dead, me, other, remote} {
		if _, ok := AdmitToken(leases, host, 8, h, 2_000_000, 600_000, h); !ok {
			t.Fatal("setup: slot refused")
		}
	}
	row, _ := leases.Acquire(shm.KeyHash([]byte("desktop|https://shop.test/")), 2_000_000, 600_000, dead)
	if n := ReleaseEarlierIncarnations(seg, 1, me, 2_000_000, zerolog.New(io.Discard)); n != 2 {
		t.Fatalf("released %d host slots, want the dead incarnation's 2", n)
	}
	if in := InFlight(leases, host, 8, 2_000_000); in != 3 {
		t.Fatalf("%d slots held after, want 3 (this incarnation's, worker 2's, the remote's)", in)
	}
	if err := leases.Check(row, row.KeyHash, 2_000_000); err != nil {
		t.Fatalf("the dead incarnation's row lease was touched: %v", err)
	}
}
