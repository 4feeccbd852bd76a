package keyspace

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/freshq/freshq/store"
)

// The prefixes of the keyspace (badgerstore's package doc; docs/store-format.md). This file is
// the only one that spells them; the funnel (package funnel) is the only code that writes
// under PrefixSchedule and PrefixDue.
const (
	PrefixSchedule = "s/" // s/ + cacheKey                  → schedule row (codec_row.go)
	PrefixDue      = "d/" // d/ + dueAt (8 B, BE) + cacheKey → projection (codec_projection.go)
	PrefixTarget   = "t/" // t/ + cacheKey                  → target (codec_target.go)
	PrefixPage     = "p/" // p/ + cacheKey                  → page (codec_page.go)
	// The class index and its classifier's fingerprint, in a store opened with a Classifier
	// only.
	PrefixClass = "c/" // c/ + class (4 B) + dueAt (8 B) + cacheKey → projection
	ClassPrint  = "m/class"
)

// Corruptionf returns an error that wraps store.ErrCorruption with the formatted detail.
func Corruptionf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", store.ErrCorruption, fmt.Sprintf(format, args...))
}

const (
	// DueKeyHeaderLen is the length of a due-index key before its cacheKey.
	DueKeyHeaderLen = len(PrefixDue) + 8
	// ClassKeyHeaderLen is the length of a class-index key before its cacheKey.
	ClassKeyHeaderLen = len(PrefixClass) + 4 + 8
	// ClassPrintValueLen is the length of the value under ClassPrint: the fingerprint, 8 B BE.
	ClassPrintValueLen = 8
)

func prefixed(prefix string, cacheKey []byte) []byte {
	k := make([]byte, 0, len(prefix)+len(cacheKey))
	return append(append(k, prefix...), cacheKey...)
}

// Schedule is the key of cacheKey's schedule row.
func Schedule(cacheKey []byte) []byte { return prefixed(PrefixSchedule, cacheKey) }

// Target is the key of cacheKey's target.
func Target(cacheKey []byte) []byte { return prefixed(PrefixTarget, cacheKey) }

// Page is the key of cacheKey's page.
func Page(cacheKey []byte) []byte { return prefixed(PrefixPage, cacheKey) }

// AppendDue appends the due-index key of (dueAtMs, cacheKey) to dst:
//
//	+------+----------------------+-----------------+
//	| "d/" | dueAtMs (8 B, BE u64) | cacheKey        |
//	+------+----------------------+-----------------+
//
// dueAtMs must be ≥ 0 (the funnel guarantees it), so unsigned big-endian byte order is
// ascending numeric order and the index iterates in due order.
func AppendDue(dst []byte, dueAtMs int64, cacheKey []byte) []byte {
	dst = append(dst, PrefixDue...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(dueAtMs))
	return append(dst, cacheKey...)
}

// Due is the due-index key of (dueAtMs, cacheKey).
func Due(dueAtMs int64, cacheKey []byte) []byte {
	return AppendDue(make([]byte, 0, DueKeyHeaderLen+len(cacheKey)), dueAtMs, cacheKey)
}

// DecodeDue splits a due-index key (prefix included) into its due time and cacheKey. The
// returned cacheKey aliases k. A key that is not a due-index key, carries a due time above
// math.MaxInt64, or whose cacheKey breaks the key limits returns an error wrapping
// ErrCorruption.
func DecodeDue(k []byte) (dueAtMs int64, cacheKey []byte, err error) {
	if len(k) < DueKeyHeaderLen || string(k[:len(PrefixDue)]) != PrefixDue {
		return 0, nil, Corruptionf("due key %q: not a due-index key", k)
	}
	u := binary.BigEndian.Uint64(k[len(PrefixDue):DueKeyHeaderLen])
	if u > math.MaxInt64 {
		return 0, nil, Corruptionf("due key %q: due time out of range", k)
	}
	cacheKey = k[DueKeyHeaderLen:]
	if err := store.ValidateKey(cacheKey); err != nil {
		return 0, nil, Corruptionf("due key %q: %v", k, err)
	}
	return int64(u), cacheKey, nil
}

// AppendClass appends the class-index key of (class, dueAtMs, cacheKey) to dst:
//
//	c/ + class (4 B, BE) + dueAt (8 B, BE) + cacheKey
func AppendClass(dst []byte, class uint32, dueAtMs int64, cacheKey []byte) []byte {
	dst = append(dst, PrefixClass...)
	dst = binary.BigEndian.AppendUint32(dst, class)
	dst = binary.BigEndian.AppendUint64(dst, uint64(dueAtMs))
	return append(dst, cacheKey...)
}

// Class is the class-index key of (class, dueAtMs, cacheKey).
func Class(class uint32, dueAtMs int64, cacheKey []byte) []byte {
	return AppendClass(make([]byte, 0, ClassKeyHeaderLen+len(cacheKey)), class, dueAtMs, cacheKey)
}

// ClassPrefix is the prefix of every entry of class: c/ + class.
func ClassPrefix(class uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte(PrefixClass), class)
}

// DecodeClass splits a class-index key (prefix included) into its class, due time and
// cacheKey. cacheKey aliases k. A key that is not one is an error wrapping store.ErrCorruption.
func DecodeClass(k []byte) (class uint32, dueAtMs int64, cacheKey []byte, err error) {
	if len(k) < ClassKeyHeaderLen || string(k[:len(PrefixClass)]) != PrefixClass {
		return 0, 0, nil, Corruptionf("class key %q: not a class-index key", k)
	}
	class = binary.BigEndian.Uint32(k[len(PrefixClass):])
	u := binary.BigEndian.Uint64(k[len(PrefixClass)+4 : ClassKeyHeaderLen])
	if u > math.MaxInt64 {
		return 0, 0, nil, Corruptionf("class key %q: due time out of range", k)
	}
	cacheKey = k[ClassKeyHeaderLen:]
	if err := store.ValidateKey(cacheKey); err != nil {
		return 0, 0, nil, Corruptionf("class key %q: %v", k, err)
	}
	return class, int64(u), cacheKey, nil
}
