package store

// TestSignals are the named points at which a test can watch or steer a store. Every backend
// takes them in its options, and the conformance suite (store/storetest) sets them the same
// way on each; a backend without such a point ignores it. Production leaves them zero.
type TestSignals struct {
	// BeforeCommit runs in the committer once a batch has lowered the floor for its writes,
	// just before its transaction commits.
	BeforeCommit func()
	// AfterGC runs after each value-log GC run with its result.
	AfterGC func(rewrites int, err error)
	// InBadgerWrite runs inside Badger's write of a transaction, after its commit timestamp
	// is taken and its values are in the value log, before its memtable write: a test holds a
	// commit open there, as a write stalled behind a memtable flush would be. (Badger has no
	// hook; its debug line at that point is the signal.)
	InBadgerWrite func()
	// Mutations are the deliberate breaks of a store's protocol that show a test can fail.
	// They exist only in a build with the tag testclock (mutations_testclock.go); in any
	// other build Mutations is empty and its methods report false, so no shipped binary can
	// be made to break the floor protocol, by its environment or otherwise.
	Mutations Mutations
}
