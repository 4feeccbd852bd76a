package shm

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/freshq/freshq/internal/invariants"
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

// A lease that arrives from outside the process (a result batch, a remote renderer) may name
// any slot. None of the methods taking a Lease may reach past the table: out of range is a
// refusal, and so is a slot that holds another key.
func TestLeaseFromOutsideIsCheckedBeforeUse(t *testing.T) {
	l := newLeases(t, 16, 4)
	h := uint64(5)
	good, _ := l.Acquire(h, epoch, ttl, 1)
	for _, slot := range []uint32{16, 17, 1 << 20, 1<<32 - 1} {
		bad := Lease{Slot: slot, State: good.State, KeyHash: h}
		if err := l.Check(bad, h, epoch+1); !errors.Is(err, ErrLeaseSlot) {
			t.Fatalf("check of slot %d: %v, want ErrLeaseSlot", slot, err)
		}
		if l.Release(bad, epoch+1, grace) {
			t.Fatalf("release of slot %d succeeded", slot)
		}
		if l.Extend(&bad, epoch+1, ttl) {
			t.Fatalf("extend of slot %d succeeded", slot)
		}
	}
	other := good
	other.KeyHash = 6 // the right slot and state, claimed for another key
	if err := l.Check(other, 6, epoch+1); !errors.Is(err, ErrLeaseNotHeld) {
		t.Fatalf("check of a lease whose slot holds another key: %v", err)
	}
	if err := l.Check(good, 6, epoch+1); !errors.Is(err, ErrLeaseKey) {
		t.Fatalf("check of a lease against another key: %v", err)
	}
	if l.Release(other, epoch+1, grace) || l.Extend(&other, epoch+1, ttl) {
		t.Fatal("release or extend of a lease whose hash is not its slot's succeeded")
	}
	if err := l.Check(good, h, epoch+1); err != nil {
		t.Fatalf("the real lease after the refusals: %v", err)
	}
}

func TestLeaseCheck(t *testing.T) {
	l := newLeases(t, 16, 4)
	lease, _ := l.Acquire(5, epoch, 1000, 1)
	if err := l.Check(lease, 5, epoch+999); err != nil {
		t.Fatalf("held lease: %v", err)
	}
	for name, bad := range map[string]Lease{
		"never granted": {Slot: lease.Slot + 1, State: 0, KeyHash: 5},
		"forged state":  {Slot: lease.Slot, State: lease.State + 1, KeyHash: 5},
		"zero":          {KeyHash: 5},
	} {
		if err := l.Check(bad, 5, epoch+1); !errors.Is(err, ErrLeaseNotHeld) {
			t.Fatalf("%s: %v, want ErrLeaseNotHeld", name, err)
		}
	}
	if err := l.Check(lease, 5, epoch+1000); !errors.Is(err, ErrLeaseNotHeld) {
		t.Fatalf("lapsed lease: %v", err)
	}
	// A lapsed lease released late is marked spent where it lies: even a clock that steps back
	// does not make it held again.
	if l.Release(lease, epoch+1000, grace) {
		t.Fatal("release of a lapsed lease succeeded")
	}
	if err := l.Check(lease, 5, epoch+10); !errors.Is(err, ErrLeaseNotHeld) {
		t.Fatalf("spent lease with the clock stepped back: %v", err)
	}
	if _, st := l.Acquire(5, epoch+1000, ttl, 2); st != Acquired {
		t.Fatalf("the spent slot is not free: %v", st)
	}

	// Released: not held. Re-granted: the old lease is still not held.
	l2 := newLeases(t, 16, 4)
	a, _ := l2.Acquire(7, epoch, ttl, 1)
	l2.Release(a, epoch+1, 0)
	if err := l2.Check(a, 7, epoch+1); !errors.Is(err, ErrLeaseNotHeld) {
		t.Fatalf("released lease: %v", err)
	}
	b, _ := l2.Acquire(7, epoch+2, ttl, 2)
	if b.Slot != a.Slot {
		t.Fatalf("re-grant in slot %d, want the key's own slot %d", b.Slot, a.Slot)
	}
	if err := l2.Check(a, 7, epoch+3); !errors.Is(err, ErrLeaseNotHeld) {
		t.Fatalf("old lease after a re-grant: %v", err)
	}
	if err := l2.Check(b, 7, epoch+3); err != nil {
		t.Fatalf("new lease: %v", err)
	}
}

// A release ends the grant, even from a copy of the lease taken before an Extend of it (worker
// 0 releases with the lease a result carried while the holder may have extended since).
func TestLeaseReleaseEndsAnExtendedGrant(t *testing.T) {
	l := newLeases(t, 16, 4)
	lease, _ := l.Acquire(5, epoch, 1000, 1)
	before := lease
	if !l.Extend(&lease, epoch+500, 1000) {
		t.Fatal("extend failed")
	}
	if !l.Release(before, epoch+600, 0) {
		t.Fatal("release from the pre-extend copy failed")
	}
	if err := l.Check(lease, 5, epoch+601); !errors.Is(err, ErrLeaseNotHeld) {
		t.Fatalf("extended lease after its release: %v", err)
	}
}

func TestLeaseRevoke(t *testing.T) {
	l := newLeases(t, 16, 4)
	lease, _ := l.Acquire(5, epoch, ttl, 1)
	ended, held := l.Revoke(5, epoch+100, grace)
	if !ended || !held {
		t.Fatalf("revoke of a live lease: ended %v held %v", ended, held)
	}
	if err := l.Check(lease, 5, epoch+101); !errors.Is(err, ErrLeaseNotHeld) {
		t.Fatalf("revoked lease checks: %v", err)
	}
	if l.Release(lease, epoch+101, grace) {
		t.Fatal("the revoked holder's release succeeded")
	}
	stale := lease
	if l.Extend(&stale, epoch+101, ttl) {
		t.Fatal("the revoked holder's extend succeeded")
	}
	if _, st := l.Acquire(5, epoch+100+grace-1, ttl, 2); st != Held {
		t.Fatalf("acquire inside the hold: %v", st)
	}
	if _, st := l.Acquire(5, epoch+100+grace, ttl, 2); st != Acquired {
		t.Fatalf("acquire after the hold: %v", st)
	}

	// No lease: the hold alone keeps a stale ready-set entry from being granted.
	if ended, held := l.Revoke(9, epoch, 2*grace); ended || !held {
		t.Fatalf("revoke of an idle key: ended %v held %v", ended, held)
	}
	if info, ok := l.Lookup(9, epoch); !ok || !info.Released || info.ExpiresAtMs != epoch+2*grace || info.Holder != HoldHolder {
		t.Fatalf("the hold: %+v %v", info, ok)
	}
	if _, st := l.Acquire(9, epoch+2*grace-1, ttl, 2); st != Held {
		t.Fatalf("acquire inside the hold of an idle key: %v", st)
	}
	// A second revoke lengthens a shorter hold, never shortens a longer one.
	l.Revoke(9, epoch+1, 3*grace)
	l.Revoke(9, epoch+2, 1)
	if info, _ := l.Lookup(9, epoch+2); info.ExpiresAtMs != epoch+1+3*grace {
		t.Fatalf("hold after two revokes ends at %d, want %d", info.ExpiresAtMs, epoch+1+3*grace)
	}
	if s := l.Stats(epoch + 2); s.Live != 1 || s.Graces != 1 {
		t.Fatalf("stats %+v: one lease (key 5, granted again) and one hold (key 9)", s)
	}

	// holdMs 0 ends the lease and frees the key at once.
	a, _ := l.Acquire(11, epoch, ttl, 1)
	if ended, _ := l.Revoke(11, epoch+1, 0); !ended {
		t.Fatal("revoke without a hold did not end the lease")
	}
	if l.Check(a, 11, epoch+1) == nil {
		t.Fatal("lease ended without a hold still checks")
	}
	if _, st := l.Acquire(11, epoch+1, ttl, 2); st != Acquired {
		t.Fatalf("acquire after a revoke without a hold: %v", st)
	}
}

func TestLeaseRevokeInAWindowOfLiveLeases(t *testing.T) {
	l := newLeases(t, 4, 4)
	for k := uint64(1); k <= 4; k++ {
		l.Acquire(k, epoch, ttl, k)
	}
	if ended, held := l.Revoke(99, epoch, grace); ended || held {
		t.Fatalf("revoke with no room: ended %v held %v, want false false", ended, held)
	}
	for k := uint64(1); k <= 4; k++ {
		if info, ok := l.Lookup(k, epoch); !ok || info.Released {
			t.Fatalf("key %d lost its lease to a hold", k)
		}
	}
}

func TestLeaseCountHolder(t *testing.T) {
	l := newLeases(t, 64, 8)
	for k := uint64(1); k <= 5; k++ {
		l.Acquire(k, epoch, int64(k)*1000, 7)
	}
	other, _ := l.Acquire(50, epoch, ttl, 8)
	l.Release(other, epoch, grace)
	held, _ := l.Acquire(51, epoch, ttl, 7)
	l.Release(held, epoch, grace) // a grace is not a lease
	if n := l.CountHolder(7, epoch); n != 5 {
		t.Fatalf("holder 7 at start: %d, want 5", n)
	}
	if n := l.CountHolder(7, epoch+2000); n != 3 {
		t.Fatalf("holder 7 after two lapsed: %d, want 3", n)
	}
	if n := l.CountHolder(8, epoch); n != 0 {
		t.Fatalf("holder 8: %d", n)
	}
}

// Revoke races acquirers of the same key (a stale ready-set entry being granted while worker 0
// deletes the row): whatever grant an acquirer got before Revoke returned no longer checks
// afterwards, and no acquire begun after it succeeds inside the hold. Each round's Revoke
// starts only once both acquirers have tried at least once (a barrier), and they keep trying
// while it runs: one churns (acquires and releases at once, so the key keeps passing through
// free, which is when Revoke must place its hold), the other keeps what it gets. The test
// counts the rounds in which the churner took a step while Revoke ran, and requires some. On
// a loaded machine the two goroutines may share one core for many rounds in a row, and no
// round then races: the test goes on, up to ten times its rounds, until one has.
func TestRevokeRacesAcquire(t *testing.T) {
	l := newLeases(t, 64, 8)
	const hold = 1000
	rounds := 2000
	if invariants.Race {
		rounds = 500
	}
	now := int64(epoch)
	raced, round := 0, 0
	for ; round < rounds || raced == 0 && round < 10*rounds; round++ {
		key := uint64(round%50 + 1)
		var wg sync.WaitGroup
		var done, revoked atomic.Bool
		var churns atomic.Int64
		tried := make(chan struct{}, 2)
		kept := make(chan Lease, 1)
		late := make(chan Lease, 1) // an acquire begun after Revoke returned that succeeded
		wg.Add(2)
		go func() { // the churner
			defer wg.Done()
			for first := true; !done.Load(); first = false {
				after := revoked.Load()
				if lease, st := l.Acquire(key, now, ttl, 1); st == Acquired {
					if after {
						select {
						case late <- lease:
						default:
						}
					}
					l.Release(lease, now, 0)
				}
				churns.Add(1)
				if first {
					tried <- struct{}{}
				}
			}
		}()
		go func() { // the keeper
			defer wg.Done()
			for first := true; !done.Load(); first = false {
				after := revoked.Load()
				if lease, st := l.Acquire(key, now, ttl, 2); st == Acquired {
					if after {
						select {
						case late <- lease:
						default:
						}
					}
					kept <- lease
					if first {
						tried <- struct{}{}
					}
					return
				}
				if first {
					tried <- struct{}{}
				}
			}
		}()
		<-tried
		<-tried
		before := churns.Load()
		_, held := l.Revoke(key, now, hold)
		revoked.Store(true)
		if churns.Load() != before {
			raced++
		}
		done.Store(true)
		wg.Wait()
		close(kept)
		if !held {
			t.Fatalf("round %d: no room for the hold", round)
		}
		select {
		case lease := <-late:
			t.Fatalf("round %d: an acquire begun after the revoke succeeded: %+v", round, lease)
		default:
		}
		for lease := range kept {
			if err := l.Check(lease, key, now); err == nil {
				t.Fatalf("round %d: a grant made before the revoke still checks: %+v", round, lease)
			}
		}
		if _, st := l.Acquire(key, now+hold-1, ttl, 3); st != Held {
			t.Fatalf("round %d: acquire inside the hold: %v", round, st)
		}
		now += hold + 1
	}
	t.Logf("the churner stepped during Revoke in %d of %d rounds", raced, round)
	if raced == 0 {
		t.Fatal("Revoke never ran while an acquirer did: the race was not exercised")
	}
}

// A holder that keeps no lease words finds its leases by key and holder: ReleaseHeld and
// ExtendHeld touch only holder's live lease of the key, and ReleaseHolders only the leases of
// the holders it accepts.
func TestLeasesHeldByAHolder(t *testing.T) {
	seg := newTestSegment(t, Options{LeaseCapacity: 64})
	l := seg.Leases()
	a, b := KeyHash([]byte("a")), KeyHash([]byte("b"))
	la, _ := l.Acquire(a, 2_000_000, 1_000, 7)
	if _, st := l.Acquire(b, 2_000_000, 1_000, 8); st != Acquired {
		t.Fatal("setup: b refused")
	}
	l.ExtendHeld(a, 8, 2_000_000, 2_005_000) // not 8's
	l.ExtendHeld(a, 7, 2_000_000, 2_005_000)
	l.ExtendHeld(a, 7, 2_000_000, 2_003_000) // never shortens
	if info, ok := l.Lookup(a, 2_000_000); !ok || info.ExpiresAtMs != 2_005_000 {
		t.Fatalf("a's lease %+v after the extensions, want it to expire at 2005000", info)
	}
	if l.ReleaseHeld(a, 8, 2_000_000) || !l.ReleaseHeld(a, 7, 2_000_000) || l.ReleaseHeld(a, 7, 2_000_000) {
		t.Fatal("ReleaseHeld released another holder's lease, or not its own exactly once")
	}
	if err := l.Check(la, a, 2_000_000); err == nil {
		t.Fatal("a's lease still checks after its release")
	}
	if n := l.ReleaseHolders(2_000_000, func(h uint64) bool { return h == 9 }); n != 0 {
		t.Fatalf("ReleaseHolders released %d leases of a holder that has none", n)
	}
	if n := l.ReleaseHolders(2_000_000, func(h uint64) bool { return h == 8 }); n != 1 {
		t.Fatalf("ReleaseHolders released %d of holder 8's leases, want 1", n)
	}
	if _, ok := l.Lookup(b, 2_000_000); ok {
		t.Fatal("b's lease is live after its holder's release")
	}
}
