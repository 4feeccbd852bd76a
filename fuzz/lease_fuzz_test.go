package fuzz

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/freshq/freshq/shm"
)

// FuzzLeaseWords drives the lease table with leases made of arbitrary words, as a forged or
// corrupted result batch would carry them, mixed with real grants: Check, Release, Extend and
// Revoke must never reach past the table, never fail with an unmarked error, and never break
// the table's promises: at most one live lease per key, a refused call changes nothing a real
// holder can see, and no released or revoked grant checks again. A release is fuzzed as worker
// 0 makes one for a lease from outside: Check first, then Release; a forged lease never passes
// the Check, so it never releases the real grant.
func FuzzLeaseWords(f *testing.F) {
	const capacity = 8
	word := func(slot uint32, state, hash uint64, op byte) []byte {
		b := binary.LittleEndian.AppendUint32(nil, slot)
		b = binary.LittleEndian.AppendUint64(b, state)
		b = binary.LittleEndian.AppendUint64(b, hash)
		return append(b, op)
	}
	f.Add(word(capacity, 1<<30, 5, 0))        // slot = capacity
	f.Add(word(1<<32-1, 1<<30, 5, 1))         // the last slot number a wire lease can carry
	f.Add(word(0, 0, 0, 2))                   // state 0: never granted
	f.Add(word(3, 1<<40|7, 3, 3))             // a plausible state in a plausible slot
	f.Add(word(5, ^uint64(0), ^uint64(0), 4)) // every bit set
	f.Add(word(2, 1<<24|1, 2, 5)[:9])         // truncated mid-state
	f.Add(append(word(1, 0, 1, 0), word(9, 0, 1, 3)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := shm.Options{ReadyCapacity: 1, KeyCapacity: 8, LeaseCapacity: capacity, LeaseWindow: 3, Workers: 1, EpochMs: 1}
		size, err := shm.SizeFor(opts)
		if err != nil {
			t.Fatal(err)
		}
		mem := shm.AlignedMemory(int(size))
		seg, err := shm.Format(mem, opts)
		if err != nil {
			t.Fatal(err)
		}
		l := seg.Leases()
		now := int64(1000)
		// Two real holders; the fuzz words are thrown at the table around them.
		real := map[uint64]shm.Lease{}
		for _, h := range []uint64{3, 11} {
			lease, st := l.Acquire(h, now, 60_000, h)
			if st != shm.Acquired {
				t.Fatalf("setup acquire %d: %v", h, st)
			}
			real[h] = lease
		}
		for len(data) >= 21 {
			lease := shm.Lease{
				Slot:    binary.LittleEndian.Uint32(data),
				State:   binary.LittleEndian.Uint64(data[4:]),
				KeyHash: binary.LittleEndian.Uint64(data[12:]),
			}
			op := data[20]
			data = data[21:]
			now += int64(op >> 4)
			_, forged := real[lease.KeyHash]
			forged = forged && lease != real[lease.KeyHash]
			switch op % 5 {
			case 0:
				err := l.Check(lease, lease.KeyHash, now)
				if err != nil && !errors.Is(err, shm.ErrLeaseSlot) && !errors.Is(err, shm.ErrLeaseKey) && !errors.Is(err, shm.ErrLeaseNotHeld) {
					t.Fatalf("unmarked error %v", err)
				}
				if err == nil && forged {
					t.Fatalf("a forged lease %+v checks (real %+v)", lease, real[lease.KeyHash])
				}
			case 1:
				// As worker 0 does with a lease from outside: Check, then Release (Release is
				// for the holder, and matches a grant by slot, hash and version only).
				if l.Check(lease, lease.KeyHash, now) != nil {
					break
				}
				if forged {
					t.Fatalf("a forged lease %+v passed Check (real %+v)", lease, real[lease.KeyHash])
				}
				l.Release(lease, now, 10)
			case 2:
				ext := lease
				if l.Extend(&ext, now, 1000) && !forged {
					if _, ok := real[lease.KeyHash]; ok {
						real[lease.KeyHash] = ext // the real grant, extended: its words now
					}
				}
			case 3:
				l.Revoke(lease.KeyHash, now, int64(op>>4)*100)
			case 4:
				if got, st := l.Acquire(lease.KeyHash, now, 5000, 1); st == shm.Acquired {
					if err := l.Check(got, lease.KeyHash, now); err != nil {
						t.Fatalf("a fresh grant does not check: %v", err)
					}
					if _, ok := real[lease.KeyHash]; ok {
						real[lease.KeyHash] = got // the key's real grant now
					}
				}
			}
			// At most one live, unreleased lease per key.
			for _, h := range []uint64{lease.KeyHash, 3, 11} {
				if n := liveLeases(mem, h, uint64(now-opts.EpochMs), capacity); n > 1 {
					t.Fatalf("key %d has %d live leases", h, n)
				}
			}
		}
	})
}

// liveLeases counts the live, unreleased leases of h by reading the table's slots from the
// segment's memory, laid out as docs/shm-format.md says (the fuzz target is single-threaded).
func liveLeases(mem []byte, h uint64, relNow uint64, capacity int) int {
	base := binary.LittleEndian.Uint64(mem[88:]) + 64
	n := 0
	for i := range uint64(capacity) {
		slot := mem[base+32*i:]
		state, hash := binary.LittleEndian.Uint64(slot), binary.LittleEndian.Uint64(slot[8:])
		if hash == h && state>>24 > relNow && state&(1<<23) == 0 {
			n++
		}
	}
	return n
}
