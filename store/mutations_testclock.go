//go:build testclock

package store

// Mutations are deliberate breaks of a store's protocol, each the defect a test must be able
// to catch: a test that sets one and still passes checks nothing. This build is for tests
// only (the tag testclock, testkit/testbin): in any other build Mutations is empty
// (mutations_off.go) and the stores cannot break the protocol.
type Mutations struct {
	// NaiveAdvance makes a pass advance the floor the way the floor protocol forbids: to
	// min(first due row observed, now) − guard, from whatever the floor holds, counting no
	// write in flight. The tests that show this strands rows use it (store/storetest's
	// NaiveFloorStrands), so that the F1 checker is known to bite.
	NaiveAdvance bool
	// FloorOnWriter makes a write lower the floor of the writing node's first shard instead
	// of the row's own (PostgreSQL only): the defect of the system freshq replaces, which
	// strands rows below their owner's floor. The cluster's tests use it to show they can fail.
	FloorOnWriter bool
}

// AdvancesNaively reports NaiveAdvance.
func (m Mutations) AdvancesNaively() bool { return m.NaiveAdvance }

// LowersWriterFloor reports FloorOnWriter.
func (m Mutations) LowersWriterFloor() bool { return m.FloorOnWriter }
