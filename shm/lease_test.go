package shm

import (
	"sync"
	"sync/atomic"
	"testing"
)

const (
	epoch = 1_000_000
	ttl   = 600_000 // 10 min
	grace = 5_000
)

func newLeases(t *testing.T, capacity, window int) *Leases {
	t.Helper()
	return newTestSegment(t, Options{LeaseCapacity: capacity, LeaseWindow: window, EpochMs: epoch}).Leases()
}

func TestLeaseAcquireRelease(t *testing.T) {
	l := newLeases(t, 64, 8)
	h := KeyHash([]byte("desktop|https://example.test/"))
	now := int64(epoch + 10)
	lease, st := l.Acquire(h, now, ttl, 7)
	if st != Acquired {
		t.Fatalf("acquire: %v", st)
	}
	if _, st := l.Acquire(h, now+1, ttl, 8); st != Held {
		t.Fatalf("second acquire of a leased key: %v, want held", st)
	}
	info, ok := l.Lookup(h, now+1)
	if !ok || info.Holder != 7 || info.AcquiredAtMs != now || info.ExpiresAtMs != now+ttl || info.KeyHash != h {
		t.Fatalf("lookup %+v %v", info, ok)
	}
	if !l.Release(lease, now+100, grace) {
		t.Fatal("release of a held lease failed")
	}
	if l.Release(lease, now+101, grace) {
		t.Fatal("second release succeeded")
	}
	// The commit-visibility grace: unclaimable until now+100+grace, then free.
	if _, st := l.Acquire(h, now+100+grace-1, ttl, 8); st != Held {
		t.Fatalf("acquire inside grace: %v, want held", st)
	}
	if _, st := l.Acquire(h, now+100+grace, ttl, 8); st != Acquired {
		t.Fatalf("acquire after grace: %v", st)
	}
	s := l.Stats(now + 100 + grace)
	if s.Live != 1 || s.RefusedHeld != 2 || s.Capacity != 64 {
		t.Fatalf("stats %+v", s)
	}
}

func TestLeaseReleaseWithoutGraceFreesAtOnce(t *testing.T) {
	l := newLeases(t, 16, 4)
	lease, _ := l.Acquire(99, epoch, ttl, 1)
	l.Release(lease, epoch+5, 0)
	if _, st := l.Acquire(99, epoch+5, ttl, 2); st != Acquired {
		t.Fatalf("acquire after a zero-grace release: %v", st)
	}
}

func TestLeaseOfKilledHolderLapsesAtTTL(t *testing.T) {
	l := newLeases(t, 16, 4)
	if _, st := l.Acquire(5, epoch, ttl, 1); st != Acquired {
		t.Fatal(st)
	}
	// The holder dies without releasing. Nobody can take the key until the TTL passes.
	if _, st := l.Acquire(5, epoch+ttl-1, ttl, 2); st != Held {
		t.Fatalf("before expiry: %v", st)
	}
	if _, st := l.Acquire(5, epoch+ttl, ttl, 2); st != Acquired {
		t.Fatalf("at expiry: %v", st)
	}
}

// The bug that shipped in the system freshq replaces: a holder whose lease lapsed releases
// late and wipes the newer holder's lease. Here the late release must change nothing.
func TestLateReleaseNeverShortensNewerLease(t *testing.T) {
	l := newLeases(t, 16, 4)
	old, _ := l.Acquire(5, epoch, ttl, 1)
	newer, st := l.Acquire(5, epoch+ttl+1, ttl, 2)
	if st != Acquired {
		t.Fatal(st)
	}
	if l.Release(old, epoch+ttl+2, grace) {
		t.Fatal("a lapsed lease's release succeeded")
	}
	if _, st := l.Acquire(5, epoch+ttl+3, ttl, 3); st != Held {
		t.Fatalf("newer lease lost after late release: %v", st)
	}
	info, ok := l.Lookup(5, epoch+ttl+3)
	if !ok || info.Holder != 2 || info.ExpiresAtMs != epoch+ttl+1+ttl {
		t.Fatalf("newer lease changed: %+v %v", info, ok)
	}
	// Even a release that is late but arrives while the old slot is untouched must not apply
	// to a lapsed lease: it would create a second live slot for the key.
	l2 := newLeases(t, 16, 4)
	lapsed, _ := l2.Acquire(6, epoch, 10, 1)
	if l2.Release(lapsed, epoch+10, grace) {
		t.Fatal("release of a lease at its expiry succeeded")
	}
	if !l.Release(newer, epoch+ttl+4, 0) {
		t.Fatal("holder could not release its own lease")
	}
}

func TestLeaseExtend(t *testing.T) {
	l := newLeases(t, 16, 4)
	lease, _ := l.Acquire(5, epoch, 1000, 1)
	if !l.Extend(&lease, epoch+900, 1000) {
		t.Fatal("extend of a live lease failed")
	}
	if _, st := l.Acquire(5, epoch+1500, ttl, 2); st != Held {
		t.Fatalf("extended lease not held at +1500: %v", st)
	}
	if !l.Release(lease, epoch+1600, 0) {
		t.Fatal("release after extend failed: the extended state was not kept")
	}
	stale := lease
	if l.Extend(&stale, epoch+1700, 1000) {
		t.Fatal("extend of a released lease succeeded")
	}
}

func TestLeaseTableFullRefusesNeverOverwrites(t *testing.T) {
	l := newLeases(t, 4, 4) // one window spans the whole table
	var held []Lease
	for k := uint64(1); k <= 4; k++ {
		lease, st := l.Acquire(k, epoch, ttl, k)
		if st != Acquired {
			t.Fatalf("key %d: %v", k, st)
		}
		held = append(held, lease)
	}
	if _, st := l.Acquire(99, epoch, ttl, 99); st != Full {
		t.Fatalf("acquire on a full table: %v, want full", st)
	}
	for k := uint64(1); k <= 4; k++ {
		if info, ok := l.Lookup(k, epoch); !ok || info.Holder != k {
			t.Fatalf("key %d lost after a refused acquire: %+v %v", k, info, ok)
		}
	}
	if s := l.Stats(epoch); s.RefusedFull != 1 || s.Live != 4 {
		t.Fatalf("stats %+v", s)
	}
	l.Release(held[2], epoch+1, 0)
	if _, st := l.Acquire(99, epoch+1, ttl, 99); st != Acquired {
		t.Fatalf("acquire after a slot freed: %v", st)
	}
}

func TestLeaseWindowWrapsAroundTable(t *testing.T) {
	l := newLeases(t, 8, 3)
	// Keys whose home is the last slot spill into slots 0 and 1.
	for i, k := range []uint64{7, 15, 23} {
		if _, st := l.Acquire(k, epoch, ttl, uint64(i)); st != Acquired {
			t.Fatalf("key %d: %v", k, st)
		}
	}
	if _, st := l.Acquire(31, epoch, ttl, 9); st != Full {
		t.Fatalf("fourth key in a three-slot window: %v", st)
	}
	if _, st := l.Acquire(15, epoch, ttl, 9); st != Held {
		t.Fatalf("key in a wrapped slot not found: %v", st)
	}
}

func TestLeaseBeforeEpochSaturates(t *testing.T) {
	l := newLeases(t, 8, 2)
	if _, st := l.Acquire(3, epoch-50, 10, 1); st != Acquired {
		t.Fatal(st)
	}
	// A lease whose whole life lies before the epoch is stored as already lapsed.
	if _, st := l.Acquire(3, epoch-40, 10, 2); st != Acquired {
		t.Fatalf("lease before the epoch did not lapse: %v", st)
	}
}

// Goroutines hammer a few keys. Each holder marks the key as occupied right after acquiring and
// unmarks it before releasing; two holders at once would find the mark already set.
func TestLeaseMutualExclusionConcurrent(t *testing.T) {
	const keys, workers, rounds = 8, 8, 3000
	l := newLeases(t, 64, 8)
	var occupied [keys]atomic.Int32
	var grants atomic.Int64
	var wg sync.WaitGroup
	var bad atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				k := uint64((i*7 + w) % keys)
				lease, st := l.Acquire(k+1, epoch, ttl, uint64(w))
				if st != Acquired {
					continue
				}
				if occupied[k].Add(1) != 1 {
					bad.Add(1)
				}
				grants.Add(1)
				occupied[k].Add(-1)
				if !l.Release(lease, epoch, 0) {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d overlapping or unreleasable leases", bad.Load())
	}
	if grants.Load() == 0 {
		t.Fatal("no lease was ever granted")
	}
}

// A release grace guards against a duplicate render, never against a loss, so it must not cost
// capacity: when a window holds nothing but live leases and graces, the grace ending soonest
// makes room, and only its key loses its protection.
func TestGraceGivesWayToALease(t *testing.T) {
	l := newLeases(t, 4, 4) // one window spans the whole table
	for k := uint64(1); k <= 4; k++ {
		lease, st := l.Acquire(k, epoch, ttl, k)
		if st != Acquired {
			t.Fatal(st)
		}
		if k == 4 {
			continue // key 4 stays leased
		}
		l.Release(lease, epoch, grace+int64(k)) // key 1's grace ends first
	}
	if info, ok := l.Lookup(2, epoch); !ok || !info.Released {
		t.Fatalf("key 2 in grace: %+v %v", info, ok)
	}
	if _, st := l.Acquire(2, epoch+1, ttl, 9); st != Held {
		t.Fatalf("a key in its grace: %v, want held", st)
	}
	if s := l.Stats(epoch); s.Live != 1 || s.Graces != 3 {
		t.Fatalf("stats %+v", s)
	}
	if _, st := l.Acquire(99, epoch+1, ttl, 9); st != Acquired {
		t.Fatalf("acquire in a window of graces: %v, want acquired", st)
	}
	if _, ok := l.Lookup(1, epoch+1); ok {
		t.Fatal("the evicted grace (the one ending first) still holds its key")
	}
	for _, k := range []uint64{2, 3, 4} {
		if _, st := l.Acquire(k, epoch+1, ttl, 9); st != Held {
			t.Fatalf("key %d lost its lease or grace: %v", k, st)
		}
	}
	if s := l.Stats(epoch + 1); s.GracesEvicted != 1 || s.Live != 2 || s.Graces != 2 {
		t.Fatalf("stats after one eviction: %+v", s)
	}
}
