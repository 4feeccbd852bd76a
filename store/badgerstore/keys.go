package badgerstore

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/freshq/freshq/store"
)

// The prefixes of the keyspace (the package doc; docs/store-format.md). This file is the only one that spells them; the funnel
// (funnel.go) is the only one that writes under prefixSchedule and prefixDue.
const (
	prefixSchedule = "s/" // s/ + cacheKey                  → schedule row (codec_row.go)
	prefixDue      = "d/" // d/ + dueAt (8 B, BE) + cacheKey → projection (codec_projection.go)
	prefixTarget   = "t/" // t/ + cacheKey                  → target (codec_target.go)
	prefixPage     = "p/" // p/ + cacheKey                  → page (codec_page.go)
	// The class index and its classifier's fingerprint (classindex.go), in a store opened
	// with a Classifier only.
	prefixClass   = "c/" // c/ + class (4 B) + dueAt (8 B) + cacheKey → projection
	keyClassPrint = "m/class"
)

// corruptionf returns an error that wraps store.ErrCorruption with the formatted detail.
func corruptionf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", store.ErrCorruption, fmt.Sprintf(format, args...))
}

// dueKeyHeaderLen is the length of a due-index key before its cacheKey.
const dueKeyHeaderLen = len(prefixDue) + 8

func prefixedKey(prefix string, cacheKey []byte) []byte {
	k := make([]byte, 0, len(prefix)+len(cacheKey))
	return append(append(k, prefix...), cacheKey...)
}

func scheduleKey(cacheKey []byte) []byte { return prefixedKey(prefixSchedule, cacheKey) }
func targetKey(cacheKey []byte) []byte   { return prefixedKey(prefixTarget, cacheKey) }
func pageKey(cacheKey []byte) []byte     { return prefixedKey(prefixPage, cacheKey) }

// appendDueKey appends the due-index key of (dueAtMs, cacheKey) to dst:
//
//	+------+----------------------+-----------------+
//	| "d/" | dueAtMs (8 B, BE u64) | cacheKey        |
//	+------+----------------------+-----------------+
//
// dueAtMs must be ≥ 0 (the funnel guarantees it), so unsigned big-endian byte order is
// ascending numeric order and the index iterates in due order.
func appendDueKey(dst []byte, dueAtMs int64, cacheKey []byte) []byte {
	dst = append(dst, prefixDue...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(dueAtMs))
	return append(dst, cacheKey...)
}

func dueKey(dueAtMs int64, cacheKey []byte) []byte {
	return appendDueKey(make([]byte, 0, dueKeyHeaderLen+len(cacheKey)), dueAtMs, cacheKey)
}

// DecodeDueKey splits a due-index key (prefix included) into its due time and cacheKey. The
// returned cacheKey aliases k. A key that is not a due-index key, carries a due time above
// math.MaxInt64, or whose cacheKey breaks the key limits returns an error wrapping
// ErrCorruption.
func DecodeDueKey(k []byte) (dueAtMs int64, cacheKey []byte, err error) {
	if len(k) < dueKeyHeaderLen || string(k[:len(prefixDue)]) != prefixDue {
		return 0, nil, corruptionf("due key %q: not a due-index key", k)
	}
	u := binary.BigEndian.Uint64(k[len(prefixDue):dueKeyHeaderLen])
	if u > math.MaxInt64 {
		return 0, nil, corruptionf("due key %q: due time out of range", k)
	}
	cacheKey = k[dueKeyHeaderLen:]
	if err := store.ValidateKey(cacheKey); err != nil {
		return 0, nil, corruptionf("due key %q: %v", k, err)
	}
	return int64(u), cacheKey, nil
}
