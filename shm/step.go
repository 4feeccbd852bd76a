package shm

// StepPoint names one atomic step of the ready-buffer protocol. In the shmstep build a hook
// runs at each of them, so the interleaving model in fuzz/ can run the real Take and Publish
// one step at a time in any order it chooses. In every other build the hook compiles away.
type StepPoint uint8

// The steps, in protocol order. See ready.go.
const (
	StepTakeLoadedActive StepPoint = iota
	StepTakeLoadedCursor
	StepTakeAdded
	StepTakeCopied
	StepTakeClamped
	StepPublishMarked
	StepPublishEntry
	StepPublishCounted
	StepPublishCursorReset
	StepPublishSealed
	StepPublishFlipped
)

var stepNames = [...]string{
	"take.loaded-active", "take.loaded-cursor", "take.added", "take.copied", "take.clamped",
	"publish.marked", "publish.entry", "publish.counted", "publish.cursor-reset", "publish.sealed", "publish.flipped",
}

func (p StepPoint) String() string {
	if int(p) < len(stepNames) {
		return stepNames[p]
	}
	return "step?"
}
