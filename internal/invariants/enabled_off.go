//go:build !(invariants || race)

package invariants

// Enabled: this build runs the expensive self-checks.
const Enabled = false
