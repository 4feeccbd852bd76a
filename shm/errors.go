package shm

import (
	"errors"
	"fmt"
)

// Errors returned when creating or attaching a segment (R5). Every attach failure wraps exactly
// one of these, so a caller can tell "not ours" from "ours but another version" from "damaged".
var (
	// ErrTruncated means the file is shorter than its header, or than the size the header declares.
	ErrTruncated = errors.New("shm: segment truncated")

	// ErrBadMagic means the file does not start with the freshq segment magic: it is not a
	// segment at all (garbage, or some other file at the configured path).
	ErrBadMagic = errors.New("shm: not a freshq segment (bad magic)")

	// ErrVersion means the segment was laid out by a different layout version. It is returned
	// wrapped in a *VersionError that names both versions.
	ErrVersion = errors.New("shm: segment layout version mismatch")

	// ErrCorrupt means the header has the right magic and version but fails its checksum, or
	// declares sections that overlap, are misaligned or do not fit the file.
	ErrCorrupt = errors.New("shm: segment header corrupt")
)

// Errors returned by Create for options that cannot describe a valid segment.
var (
	// ErrInvalidOptions wraps every Options.Validate failure.
	ErrInvalidOptions = errors.New("shm: invalid options")
)

// Errors returned by ready-buffer writes.
var (
	// ErrKeyTooLong is returned for a single entry whose key exceeds the segment's key
	// capacity. Publish never returns it: it drops such entries and counts them instead.
	ErrKeyTooLong = errors.New("shm: key longer than the entry's key capacity")
)

// Errors returned by Leases.Check, for a lease that arrives with a result. The first two mean
// the lease cannot be one this table granted for that key (a caller's bug or a forged lease:
// refuse the request); the third means it was, but is not held any more (fence the result).
var (
	// ErrLeaseSlot means the lease names a slot past the end of the table.
	ErrLeaseSlot = errors.New("shm: lease slot out of range")

	// ErrLeaseKey means the lease's key hash is not the hash of the key it came with.
	ErrLeaseKey = errors.New("shm: lease is not for this key")

	// ErrLeaseNotHeld means the slot no longer holds this grant: it lapsed, was released or
	// revoked, was granted to someone else since, or was never granted.
	ErrLeaseNotHeld = errors.New("shm: lease not held")
)

// VersionError reports a layout version mismatch; it unwraps to ErrVersion.
type VersionError struct {
	Got, Want uint32
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("shm: segment layout version %d, this binary reads version %d", e.Got, e.Want)
}

// Unwrap makes errors.Is(err, ErrVersion) true.
func (e *VersionError) Unwrap() error { return ErrVersion }
