package intake

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// Result batches are applied concurrently, 256 keys each. Two sequences over disjoint keys must
// never wait for each other; locks striped by hash made two such batches share a stripe almost
// always, and so applied them one after the other.
func TestKeyLocksDisjointKeysNeverWait(t *testing.T) {
	locks := &KeyLocks{}
	waited := make(chan struct{}, 1)
	locks.Test = &TestSignals{LockWait: func() { waited <- struct{}{} }}
	batch := func(from int) [][]byte {
		keys := make([][]byte, 256)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "desktop|https://shop.test/c/item-%06d", from+i)
		}
		return keys
	}
	for b := 1; b < 8; b++ {
		unlockFirst := locks.Lock(batch(0))
		acquired := make(chan func())
		go func() { acquired <- locks.Lock(batch(b * 256)) }()
		select {
		case unlock := <-acquired:
			unlock()
			unlockFirst()
		case <-waited:
			unlockFirst()
			(<-acquired)()
			t.Fatalf("batch %d waited for batch 0, with which it shares no key", b)
		}
	}
}

// A sequence that shares one key with a held one waits for it, whatever order its keys come
// in, and proceeds once it is released.
func TestKeyLocksOverlappingKeysWait(t *testing.T) {
	locks := &KeyLocks{}
	waiting := make(chan struct{}, 1)
	locks.Test = &TestSignals{LockWait: func() { waiting <- struct{}{} }}
	a, b, c := []byte("desktop|a"), []byte("desktop|b"), []byte("desktop|c")
	unlockFirst := locks.Lock([][]byte{a, b})
	var second atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		unlock := locks.Lock([][]byte{c, b, c}) // b is held; c twice is one key
		second.Store(true)
		unlock()
	}()
	<-waiting
	if second.Load() {
		t.Fatal("the second sequence took a held key")
	}
	unlockFirst()
	<-done
	if !second.Load() {
		t.Fatal("the second sequence never ran")
	}
	locks.Lock([][]byte{a, b, c})() // everything was released
}

// Under contention from many sequences over random, overlapping key sets, no key is ever held
// by two sequences at once, and every sequence finishes (no deadlock).
func TestKeyLocksMutualExclusion(t *testing.T) {
	locks := &KeyLocks{}
	const nkeys = 40
	var owner [nkeys]atomic.Int32
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				idx := rng.Perm(nkeys)[:1+rng.IntN(6)]
				keys := make([][]byte, len(idx))
				for i, k := range idx {
					keys[i] = fmt.Appendf(nil, "desktop|k%d", k)
				}
				unlock := locks.Lock(keys)
				for _, k := range idx {
					if !owner[k].CompareAndSwap(0, int32(g+1)) {
						t.Errorf("key %d held by sequence %d and %d at once", k, owner[k].Load()-1, g)
					}
				}
				for _, k := range idx {
					owner[k].Store(0)
				}
				unlock()
			}
		}()
	}
	wg.Wait()
}
