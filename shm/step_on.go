//go:build shmstep

package shm

import "sync/atomic"

// This file exists only in the shmstep build, used by the interleaving model in fuzz/.

var (
	stepHook atomic.Pointer[func(StepPoint)]
	clampBug atomic.Bool
)

func step(p StepPoint) {
	if h := stepHook.Load(); h != nil {
		(*h)(p)
	}
}

func plainStoreClamp() bool { return clampBug.Load() }

// SetStepHook installs f to run at every protocol step, in the goroutine taking the step.
// Pass nil to remove it.
func SetStepHook(f func(StepPoint)) {
	if f == nil {
		stepHook.Store(nil)
		return
	}
	stepHook.Store(&f)
}

// SetPlainStoreClamp replaces the exhausted-take CAS clamp with a plain store: the bug that
// shipped in the system freshq replaces. The model must catch it.
func SetPlainStoreClamp(on bool) { clampBug.Store(on) }

// CursorWord exposes a slot's raw cursor word (tag<<32 | index) and its generation word, for
// the model's R3 check.
func (r *Ready) CursorWord(slotIndex int) (cursor, gen, count uint64) {
	s := &r.slots[slotIndex&1]
	return atomic.LoadUint64(s.cursor), atomic.LoadUint64(s.gen), atomic.LoadUint64(s.count)
}
