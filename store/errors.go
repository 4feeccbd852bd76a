package store

import (
	"errors"
	"fmt"
)

// Errors returned when a funnel write or a read is refused for its input. Nothing is written
// when one of these is returned.
var (
	// ErrEmptyKey is returned for a zero-length cacheKey.
	ErrEmptyKey = errors.New("store: empty cache key")

	// ErrKeyTooLong is returned for a cacheKey longer than MaxKeyLen. Keys are never truncated:
	// a truncated key names another row.
	ErrKeyTooLong = errors.New("store: cache key longer than MaxKeyLen")

	// ErrNegativeDue is returned for a dueAt below zero. The due index orders big-endian
	// unsigned bytes, in which a negative int64 would sort after every positive one.
	ErrNegativeDue = errors.New("store: negative due time")

	// ErrImplausibleDue is returned, with Options.RefuseImplausibleDue, for a due time before
	// MinDueMs or after MaxDueMs.
	ErrImplausibleDue = errors.New("store: implausible due time")

	// ErrNegativeInterval is returned for an interval below zero. Zero is legal and means
	// "absent: resolve the cadence from configuration".
	ErrNegativeInterval = errors.New("store: negative interval")

	// ErrScheduleUnset is returned by the funnel for a Schedule that was not built by
	// NewSchedule (its zero value). A put replaces the whole record, so a schedule whose
	// submitted and effective interval were never stated must not reach the disk.
	ErrScheduleUnset = errors.New("store: schedule not built by NewSchedule")

	// ErrInvalidTarget is returned for a Target whose enumerations or sizes are out of range.
	ErrInvalidTarget = errors.New("store: invalid target")

	// ErrInvalidPage is returned for a Page whose headers or body exceed the documented limits.
	ErrInvalidPage = errors.New("store: invalid page")
)

// Errors returned by reads.
var (
	// ErrNotFound is returned by the Get methods for a key that has no record.
	ErrNotFound = errors.New("store: not found")
)

// Errors returned by the lifecycle and by scans.
var (
	// ErrClosed is returned by every operation on a Store after Close, and by a Pass after
	// its Close.
	ErrClosed = errors.New("store: closed")

	// ErrPassIterated is returned by a second IterateDue on the same Pass: a pass reads its
	// snapshot once, so its observations describe exactly one scan.
	ErrPassIterated = errors.New("store: pass already iterated")

	// ErrInvalidArgument is returned for a non-positive limit or chunk size, or a negative
	// guard.
	ErrInvalidArgument = errors.New("store: invalid argument")

	// ErrInvalidOptions is wrapped by Options.Validate for every out-of-range option.
	ErrInvalidOptions = errors.New("store: invalid options")
)

// ErrCorruption marks every error caused by bytes on disk that do not decode: an unknown
// version tag, a short or over-long value, an out-of-range field, a malformed key. Test for it
// with errors.Is or IsCorruptionError; the wrapping message says which record and why.
var ErrCorruption = errors.New("store: corruption")

// IsCorruptionError reports whether err is, or wraps, ErrCorruption.
func IsCorruptionError(err error) bool { return errors.Is(err, ErrCorruption) }

// corruptionf returns an error that wraps ErrCorruption with the formatted detail.
func corruptionf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruption, fmt.Sprintf(format, args...))
}

// PartialWriteError is returned by WriteSchedules when the call failed but some of its writes
// committed: a call the funnel split across transactions, one of which failed, or a write
// refused at commit (a corrupt row it would replace) beside others that committed. Committed[i]
// reports whether the call's i-th Write is durable; each Write is still all or nothing. It
// unwraps to the failure, so errors.Is sees the cause.
type PartialWriteError struct {
	Committed []bool
	Err       error
}

func (e *PartialWriteError) Error() string {
	n := 0
	for _, c := range e.Committed {
		if c {
			n++
		}
	}
	return fmt.Sprintf("%v (%d of %d writes committed)", e.Err, n, len(e.Committed))
}

func (e *PartialWriteError) Unwrap() error { return e.Err }
