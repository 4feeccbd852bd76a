package badgerstore

import "github.com/freshq/freshq/store/badgerstore/internal/keyspace"

// DecodeDueKey splits a due-index key (prefix included) into its due time and cacheKey. The
// returned cacheKey aliases k. A key that is not a due-index key, carries a due time above
// math.MaxInt64, or whose cacheKey breaks the key limits returns an error wrapping
// ErrCorruption. The keys themselves are spelled in package keyspace.
func DecodeDueKey(k []byte) (dueAtMs int64, cacheKey []byte, err error) {
	return keyspace.DecodeDue(k)
}
