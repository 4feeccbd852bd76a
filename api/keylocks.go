package api

import (
	"slices"
	"sync"

	"github.com/freshq/freshq/shm"
)

// KeyLocks serialises worker 0's read-decide-write sequences per key. Applying a result and
// upserting a target both read a row, decide, and write it back through the funnel; without a
// lock an upsert committed between a result's read and its write would be overwritten (a lost
// update: the operator's new interval silently reverts). Every such sequence holds the locks of
// its keys from its first read to its commit. Locks are striped by key hash and always taken in
// ascending stripe order, so two sequences never deadlock.
type KeyLocks struct {
	stripes [4096]sync.Mutex
	onWait  func() // test hook: called when a lock has to wait
}

// Lock takes the locks of keys and returns the function that releases them.
func (k *KeyLocks) Lock(keys [][]byte) (unlock func()) {
	idx := make([]int, 0, len(keys))
	for _, key := range keys {
		idx = append(idx, int(shm.KeyHash(key)%uint64(len(k.stripes))))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		if !k.stripes[i].TryLock() {
			if k.onWait != nil {
				k.onWait()
			}
			k.stripes[i].Lock()
		}
	}
	return func() {
		for _, i := range idx {
			k.stripes[i].Unlock()
		}
	}
}
