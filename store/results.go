package store

// DueRow is one entry of the due index: a cacheKey, its due time and its projection.
type DueRow struct {
	Key []byte // the cacheKey
	Row
}

// KeyRow is a schedule row with its key, as ListSchedule returns it.
type KeyRow struct {
	Key []byte // the cacheKey
	Row
}

// ScanResult is the outcome of ScanDue.
type ScanResult struct {
	// Rows are the due rows in ascending due order. They and their keys belong to the caller.
	Rows []DueRow
	// FirstDueMs is the first due time observed (the minimum at or above the floor), valid
	// when HasFirstDue.
	FirstDueMs  int64
	HasFirstDue bool
	// NextDueMs is the first due time past now that the scan reached, valid when
	// HasNextDue. A capped scan stops before it.
	NextDueMs  int64
	HasNextDue bool
	// Capped is true when limit rows were returned and at least one more was due.
	Capped bool
}

// PassStats is what a pass observed.
type PassStats struct {
	// NowMs is the pass's now, fixed at BeginPass. FloorMs is the floor it read in the same
	// critical section as its snapshot: the iteration starts there.
	NowMs   int64
	FloorMs int64
	// Rows is how many due rows the iteration read.
	Rows int
	// FirstDueMs is the first due row observed (the minimum at or above the floor), valid
	// when HasFirstDue.
	FirstDueMs  int64
	HasFirstDue bool
	// NextDueMs is the first not-yet-due time seen (the first index key past now), valid
	// when HasNextDue: the node is not idle if a row falls due in 30 s.
	NextDueMs  int64
	HasNextDue bool
	// Capped is true when the iteration stopped at maxRows with more due rows waiting. The
	// index is ascending, so a capped pass kept the oldest rows and missed the recently due.
	Capped bool
	// Complete is true when the iteration reached a row past now or the end of the index.
	Complete bool
}

// IndexReport is the outcome of VerifyIndex.
type IndexReport struct {
	Rows    int // schedule rows
	Entries int // due-index entries
	// RowsWithoutEntry counts rows whose due-index entry (at the row's due time) is missing;
	// EntriesWithoutRow counts entries whose row is missing or due at another time.
	RowsWithoutEntry  int
	EntriesWithoutRow int
	// ClassEntries counts class-index entries (a store with a Classifier; classindex.go);
	// RowsWithoutClassEntry and ClassEntriesWithoutRow are the class index's disagreements
	// with the rows, as the two above are the due index's. An entry under another class than
	// its row's is one of each.
	ClassEntries           int
	RowsWithoutClassEntry  int
	ClassEntriesWithoutRow int
	// Corrupt counts rows and entries that did not decode.
	Corrupt int
	// Examples holds up to 8 offending keys, for the log.
	Examples []string
}

// OK reports whether the row set and the index agree exactly.
func (r IndexReport) OK() bool {
	return r.RowsWithoutEntry == 0 && r.EntriesWithoutRow == 0 && r.Corrupt == 0 &&
		r.RowsWithoutClassEntry == 0 && r.ClassEntriesWithoutRow == 0
}
