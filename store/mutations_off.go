//go:build !testclock

package store

// Mutations is empty outside a build with the tag testclock: this is a production build, and
// no mutation of the protocol can be switched on (mutations_testclock.go has them).
type Mutations struct{}

// AdvancesNaively is false: a production store advances its floor by the protocol only.
func (Mutations) AdvancesNaively() bool { return false }

// LowersWriterFloor is false: a production write lowers its row's own shard's floor.
func (Mutations) LowersWriterFloor() bool { return false }
