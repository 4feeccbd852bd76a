// Package store is the contract of freshq's schedule store, apart from its engines: the Store
// and Pass interfaces (everything the rest of freshq asks of a store), the records a store holds
// and their binary codecs (Row, Projection, Lanes, Target, Page, Freshness), the values the
// funnel takes (Schedule, Write, Change, Current), the floor cell (FloorCell, MemFloor), what
// passes and scans report (DueRow, PassStats, ScanResult, IndexReport), the class index as a
// sweep reads it (Classifier, ClassPass), the test signals every engine offers, and the sentinel
// errors.
//
// Two engines implement it, beside it: store/badgerstore (one embedded Badger database, the
// single-node default) and store/pgstore (PostgreSQL, one node or a cluster sharing it). The
// conformance suite in store/storetest runs the same tests against both. Only cmd/worker
// (openStore) chooses between them; everything else holds a Store and does not know which.
//
// This package imports no engine and nothing else of freshq, so the policy, the sweep and the
// tools link no database by using a row (internal/lint keeps it so, over go list -deps).
//
// # Promises every engine keeps
//
// One funnel. WriteSchedules, WriteSchedule, Modify, RefileIfUnchanged and DeleteTarget are the
// only writes. A schedule row and its due-index entry change together, atomically, and a
// Write's row, target and page commit in one transaction. A put states submitted and the
// effective interval explicitly: Schedule values are built only by NewSchedule, and an engine
// refuses the zero value (ErrScheduleUnset).
//
// The floor (F1; docs/ARCHITECTURE.md, Invariants). Every write lowers the floor of the row it
// files, before or in the transaction that files it; a pass advances the floor only to a point
// below which no row can be, counting writes in flight. After any advance, no row is due below
// the floor. How each engine makes this exact is in its own package doc.
//
// No wall clock. Every decision that depends on time takes nowMs as a parameter. Time is int64
// milliseconds since the epoch; due times are ≥ 0 (ErrNegativeDue) and, where the engine is
// asked to (RefuseImplausibleDue in both engines' options), within [MinDueMs, MaxDueMs].
//
// Keys. A cacheKey (device + "|" + normalised URL) is opaque bytes of length 1..MaxKeyLen
// (ValidateKey); a longer one is refused, never truncated: a truncated key names another row.
//
// Refusals and corruption. A write refused for its input returns one of the sentinel errors
// (errors.go) and writes nothing. Bytes that do not decode are marked ErrCorruption
// (IsCorruptionError); no engine panics on bad bytes.
//
// # Codecs
//
// Every stored record has a versioned binary codec, a method of its type (MarshalBinary,
// AppendBinary, UnmarshalBinary), drawn byte by byte in the codec files and in
// docs/store-format.md. Both engines keep a Target and a Page as these bytes, and a
// projection's flags byte is PostgreSQL's flags column: the format belongs to the contract, not
// to one engine, and a change of it is a change for both. A decoder refuses an unknown version,
// a wrong length and an out-of-range field with ErrCorruption; an encoder refuses a record it
// could not decode back (ErrInvalidTarget, ErrInvalidPage).
//
// # Limits
//
// Slices handed to an IterateDue callback, and the keys in them, are valid only until the
// callback returns. Slices returned by ScanDue and the Get methods belong to the caller. A Pass
// pins a snapshot until it is closed: close it promptly.
package store
