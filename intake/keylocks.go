package intake

import (
	"sync"

	"github.com/freshq/freshq/shm"
)

// KeyLocks serialises worker 0's read-decide-write sequences per key. Applying a result and
// upserting a target both read a row, decide, and write it back through the funnel; without a
// lock an upsert committed between a result's read and its write would be overwritten (a lost
// update: the operator's new interval silently reverts). Every such sequence holds the locks of
// its keys from its first read to its commit.
//
// A sequence takes all of its keys at once or none: Lock waits while any of them is held, so
// two sequences never deadlock, and sequences over disjoint keys never wait for each other.
// That matters because result batches are applied concurrently: with 256 keys a batch, locks
// striped by hash made two batches share a stripe almost always, and serialised them. Keys are
// told apart by their 64-bit hash; two keys sharing one only costs a needless wait.
type KeyLocks struct {
	mu    sync.Mutex
	freed *sync.Cond      // broadcast whenever keys are released
	held  map[uint64]bool // hashes of the keys held
	// Test holds the test signals (TestSignals.LockWait); nil in production.
	Test *TestSignals
}

// Lock takes the locks of keys and returns the function that releases them.
func (k *KeyLocks) Lock(keys [][]byte) (unlock func()) {
	hs := make([]uint64, len(keys))
	for i, key := range keys {
		hs[i] = shm.KeyHash(key)
	}
	k.mu.Lock()
	if k.held == nil {
		k.held = make(map[uint64]bool)
		k.freed = sync.NewCond(&k.mu)
	}
	for waited := false; k.anyHeld(hs); {
		if !waited && k.Test != nil && k.Test.LockWait != nil {
			waited = true
			k.mu.Unlock()
			k.Test.LockWait()
			k.mu.Lock()
			continue // re-check: the keys may have been released meanwhile
		}
		k.freed.Wait()
	}
	for _, h := range hs {
		k.held[h] = true
	}
	k.mu.Unlock()
	return func() {
		k.mu.Lock()
		for _, h := range hs {
			delete(k.held, h)
		}
		k.freed.Broadcast()
		k.mu.Unlock()
	}
}

func (k *KeyLocks) anyHeld(hs []uint64) bool {
	for _, h := range hs {
		if k.held[h] {
			return true
		}
	}
	return false
}
