package intake

import (
	"errors"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// What render on miss (package misses) asks of the targets: whether a page is known and
// backing off, whether its render is in flight, and a rush that leaves a render in flight alone.

// BackingOff says whether key has a stored row (known) and, when it has, returns a
// *BackingOffError when its last renders failed and the row is not due until the failure
// backoff the policy gave it has passed. A failure streak is reset by the next good render
// (the Applier), so Count > 0 means the last one failed. A store failure is a *StoreError.
func (t *Targets) BackingOff(key []byte) (known bool, err error) {
	row, err := t.store.GetSchedule(key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, &StoreError{err}
	}
	tgt, err := t.store.GetTarget(key)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return true, &StoreError{err}
	}
	left := row.DueAtMs - t.Now()
	if tgt.Failures.Count == 0 || left <= 0 {
		return true, nil
	}
	return true, &BackingOffError{Class: tgt.Failures.LastClass, RetryAfterSec: int((left + 999) / 1000)}
}

// Rendering says whether a render of key is in flight now: its lease is held, not released.
func (t *Targets) Rendering(key []byte) bool {
	li, ok := t.seg.Leases().Lookup(shm.KeyHash(key), t.Now())
	return ok && !li.Released
}

// RushForReader rushes key as a reader's miss does, and says whether its row was there to
// rush: it leaves a render in flight alone (keepInFlight), since that render brings the page
// the reader wants. A store failure is a *StoreError.
func (t *Targets) RushForReader(key []byte) (rushed bool, err error) {
	n, err := t.prioritize([][]byte{key}, "rush", keepInFlight)
	if err != nil {
		return false, &StoreError{err}
	}
	return n == 1, nil
}
