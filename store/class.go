package store

// The class index, as the contract sees it. A backend may keep, beside the due index, every
// row's entry a second time under its sweep class (both engines do, given a Classifier); its
// passes are then ClassPasses, and a sweep reads each class from its head only as far as it
// needs. A backend without it hands out plain Passes and the sweep iterates.

// Classifier names the sweep class of a schedule row. It must be a pure function of the key
// and the projection, and quick: the funnel calls it for every write, twice for a reschedule
// (the old row and the new).
type Classifier interface {
	Class(cacheKey []byte, p Projection) uint32
	// Fingerprint changes whenever Class could return another class for some row.
	Fingerprint() uint64
}

// ClassHead is the first due row of one class in a pass.
type ClassHead struct {
	Class uint32
	DueRow
}

// ClassPass is a Pass over a store that keeps the class index. A sweep reads the floor's head
// with ReadHead (which counts as the pass's iteration for AdvanceFloor: the head is the true
// minimum, so the floor protocol holds as for a full iteration) and the due rows it ranks
// with ClassHeads and ReadClass, instead of IterateDue.
type ClassPass interface {
	Pass
	// ClassFingerprint is the fingerprint of the classifier the index was built with; ok is
	// false when the store keeps no class index.
	ClassFingerprint() (fp uint64, ok bool)
	// ReadHead reads the first row at or above the floor, if it is due (first, ok), and the
	// first due time past now (Stats().NextDueMs). It is the pass's iteration: IterateDue may
	// not follow it, nor it IterateDue.
	ReadHead() (first DueRow, ok bool, err error)
	// ClassHeads returns, for each class with a row due from the floor up to now, its first
	// such row, in class order. Keys belong to the caller.
	ClassHeads() ([]ClassHead, error)
	// ReadClass appends to dst the due rows of class strictly after (afterMs, afterKey) in
	// (due, key) order, up to now, at most n, and reports whether it stopped at n. Keys
	// belong to the caller.
	ReadClass(class uint32, afterMs int64, afterKey []byte, n int, dst []DueRow) ([]DueRow, bool, error)
}

// HostLister is what a pass may also know of its store: the hosts it holds rows of. A sweep
// whose every such host is paused or at its cap in the ready set can admit no further row,
// and stops reading classes there instead of reading the rest of the due set.
type HostLister interface {
	// StoredHosts returns every host (cachekey.Host of a key) that may have a schedule row
	// at or after the pass's snapshot: a superset, since a host whose rows were all deleted
	// may stay until the store reopens. ok is false when the hosts are more than
	// MaxListedHosts (then a ready set fills from them before that matters) or unknown.
	StoredHosts() (hosts []string, ok bool)
}

// MaxListedHosts bounds StoredHosts.
const MaxListedHosts = 64
