package pgstore

import "github.com/freshq/freshq/store"

// DecodeDueRow decodes one row of a pass or scan, the six binary values the database sent for
// (cache_key, due_at_ms, flags, effective_interval_ms, stored_interval_ms, rank_interval_ms):
// the values come from outside the process, and a malformed one is an error wrapping
// store.ErrCorruption, never a panic. The key aliases vals[0].
func DecodeDueRow(vals [][]byte) ([]byte, store.Row, error) { return decodeDue(vals) }
