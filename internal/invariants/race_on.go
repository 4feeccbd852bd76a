//go:build race

package invariants

// Race: this build has the race detector.
const Race = true
