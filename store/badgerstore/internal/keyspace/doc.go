// Package keyspace spells the keys of badgerstore's Badger database, and nothing else: the
// prefixes, the key of each record of a cacheKey, the due-index and class-index keys, and
// their decoding (docs/store-format.md draws every one).
//
//	s/ + cacheKey                        → schedule row
//	d/ + dueAt (8 B big-endian) + key    → the sweep's projection
//	c/ + class (4 B) + dueAt (8 B) + key → the same, under the row's sweep class
//	t/ + cacheKey                        → target
//	p/ + cacheKey                        → rendered page
//	m/class                              → the fingerprint of the classifier c/ was built with
//
// Invariants: keys.go is the only file of the store that spells a prefix (the writer check of
// badgerstore, TestFunnelIsTheOnlyWriter, proves it for s/ and d/); a due time is encoded as
// an unsigned big-endian uint64, so it must be ≥ 0 and byte order is due order; a decoder
// never panics on bad bytes, it returns an error wrapping store.ErrCorruption. The package
// writes nothing and reads nothing: it only builds and splits byte strings.
package keyspace
