//go:build !shmstep

package shm

// step is a no-op outside the shmstep build; the compiler removes the calls.
func step(StepPoint) {}

// plainStoreClamp is the switch for the known clamp bug; it is constant false here.
func plainStoreClamp() bool { return false }
