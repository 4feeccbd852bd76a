// Package badgerstore is the store's embedded engine, the single-node default: one Badger
// database, opened by worker 0 only, implementing the contract of package store (store.Store,
// store.Pass) over the keyspace below (docs/store-format.md draws every value). It is named
// badgerstore, beside store/pgstore, so that it never shadows the badger library it imports.
//
//	s/ + cacheKey                      → schedule row (Row)
//	d/ + dueAt (8 B big-endian) + key  → the sweep's projection (Projection)
//	c/ + class (4 B) + dueAt (8 B) + key → the same, under the row's sweep class
//	t/ + cacheKey                      → target (Target)
//	p/ + cacheKey                      → rendered page (Page)
//	m/class                            → the fingerprint of the classifier c/ was built with
//
// The due index is d/ in a store opened without Options.Classifier, and c/ (with m/class) in
// one opened with it, never both (classindex.go; the merge of the classes is package dueorder).
//
// Every value is encoded by the codecs of package store (the records' MarshalBinary), drawn
// byte by byte there and in docs/store-format.md; this package spells only the keys (package keyspace).
// The store treats a cacheKey (device + "|" + normalised URL) as opaque bytes of length
// 1..store.MaxKeyLen.
//
// # Promises
//
// One writer. WriteSchedule, WriteSchedules, Modify, RefileIfUnchanged and DeleteTarget (the
// funnel, package funnel) are the only code that writes (TestFunnelIsTheOnlyWriter parses the
// engine's packages to prove it). A schedule row and its due-index entry change in one transaction,
// so no index entry exists without its row nor a row without its entry, at every instant and
// after any crash (VerifyIndex checks it). A put states submitted and the effective interval
// explicitly: store.Schedule values are built only by store.NewSchedule, and the zero value is
// refused.
//
// Group commit. Concurrent funnel calls are gathered by one committer goroutine into few
// Badger transactions. A call returns only after every transaction holding its writes has
// committed. Each Write (row, index entry, and optionally target and page) is atomic; see
// WriteSchedules for calls too large for one transaction.
//
// Durability. By default (Options.SyncWrites false) an acknowledged write survives kill -9 of
// the process: Badger's write-ahead value log is a memory-mapped file, and its pages belong to
// the kernel once written. It does not survive a power loss or a kernel crash. With
// SyncWrites true, each batch is fsynced before it is acknowledged, and an acknowledged write
// survives those too. docs/store.md has the measured cost of each.
//
// Reads never wait on a commit (readview.go). A Badger read transaction waits for every
// commit already given a timestamp to be written, so a read that opened its own would queue
// behind a render's result being applied, and behind a write stalled on a memtable flush. The
// Get methods read one shared read-only transaction, the view, which the funnel renews when
// each of its transactions completes, before any caller is acknowledged: a caller reads its
// own writes back, and a read that starts after a pass or scan opened sees at least what it
// saw. While a value-log GC runs, reads open their own transactions again.
//
// Reads a write can skip (K1). Every funnel write reads the row it replaces, to find the
// index entry to delete. A Bloom filter of the keys that have a row, built by Open from every
// s/ key and extended by the committer before it stages a row, lets a write of a key new to
// the store skip that read: every key with a row is in the filter, so its "no" is certain
// (package keyfilter). Open costs one key-only scan of s/ for it (~0.33 s per million rows). The
// same scan and stages keep the hosts the store holds rows of, while they are few, for a
// sweep to stop once every one is capped (package keyfilter, H1: never missing one).
//
// Reads a result can skip (RH1). Worker 0's sweep leaves each row it publishes with the store
// as a hint, as its pass read it, and a result's Modify takes that row instead of reading it
// again: a hinted row is the key's row as Badger holds it, because every staged write drops its
// key's hint and the sweep drops the hint of a row written after its snapshot (the funnel's hints.go).
//
// Plausible due times. With Options.RefuseImplausibleDue (worker 0 sets it), a put due before
// store.MinDueMs or after store.MaxDueMs is refused with store.ErrImplausibleDue, and nothing of its call is
// enqueued: such a row would score as the most overdue there is and hold the floor down, or
// never come due. Rows stored before the option existed may still hold one; a writer that
// keeps a stored due time checks it with store.PlausibleDue and brings it into range first, so the
// refusal is an assertion that no write path trips.
//
// The due index carries the projection. A sweep scores every due row from the index entries
// alone (store.Pass.IterateDue); it never reads a schedule row, a target or the value log.
//
// The class index (classindex.go). With a Classifier, the funnel files every row's index
// entry under c/ + the row's class instead of under d/, in the same transaction as the row. A
// sweep reads each class in due order, from its head, only as far as it needs
// (store.ClassPass). Everything that needs the rows in plain due order (the floored scan, a
// pass's IterateDue, the floor's head in ReadHead) reads the merge of the classes
// (package dueorder), which is that order exactly: the floor protocol sees the true minimum, as
// from a full iteration. One index instead of two is two fewer LSM entries for every result
// a render writes. Open rebuilds c/ when the classifier's fingerprint is not the one stored,
// drops d/ when a classifier is given, and rebuilds d/ and drops c/ when none is.
//
// Class bounds (B1, protocol.go): while a pass reads, no row of its snapshot lies below its
// class's bound, so a bounded read of each class's head finds the same heads as a full one
// (classindex.go checks it under the invariants build).
//
// The read cache (package readcache, docs/store.md): the values of the keys read most, bounded
// by Options.ReadCacheBytes; the funnel drops every key a transaction may write before it
// commits and refuses fills until the new view is published, so a read never sees a value older
// than the view would.
//
// Floor (F1; docs/ARCHITECTURE.md, Invariants). Every funnel batch lowers the floor cell to its earliest new due time
// before it commits; a Pass advances the floor only by compare-and-swap from the value it read
// together with its snapshot, and only up to min(first due row observed, now, earliest write
// in flight at or committed after the snapshot) − guard. With one writer this is exact: after
// any advance, every schedule row has dueAt ≥ floor. protocol.go holds the argument; the
// randomized interleaving test checks it. The same protocol without the guard keeps the head
// (HeadMs), where the claim fallback's scan starts: no row is due below it either, and the
// interleaving test judges it too. The store never reads the wall clock for these decisions:
// nowMs is always a parameter.
//
// Time is int64 milliseconds since the epoch; intervals are int64 ms. Due times must be ≥ 0:
// the index orders unsigned big-endian bytes, in which a negative int64 would sort last, so
// negative due times are refused (store.ErrNegativeDue) rather than re-encoded.
//
// # Limits
//
// Slices handed to an IterateDue callback, and the keys in them, are valid only until the
// callback returns. Slices returned by ScanDue and the Get methods belong to the caller.
//
// A Pass pins a Badger snapshot until it is closed: a long-open pass holds back compaction of
// the versions it can see. Close passes promptly. Close must not be called while a pass or scan
// is running in another goroutine; passes still open are closed by it.
//
// Keys over store.MaxKeyLen are refused, never truncated. Pages over store.MaxPageBody are
// refused.
//
// A schedule row that does not decode (store.ErrCorruption) cannot be rewritten by the funnel, since
// its index entry cannot be located; such writes fail with an error wrapping ErrCorruption.
// DeleteTarget of such a key fails the same way. The store never panics on bad bytes.
//
// This package is the single-node engine. Several nodes share one PostgreSQL through
// store/pgstore instead, where the floor is per shard and lives in the database. Only
// cmd/worker (openStore) chooses between them; everything above sees a store.Store, and the
// conformance suite (store/storetest) runs the same tests against both.
//
// # Packages
//
// The engine's parts below it, each with one job (internal: only this package uses them):
// internal/keyspace spells the keys; internal/funnel is the write funnel, the only writer;
// internal/keyfilter is the key filter and the stored hosts (K1, H1); internal/readcache is the
// read cache; internal/dueorder walks the due index in due order (d/, or the merge of the
// classes). This package holds the store itself: Open and Close, the floor protocol and the
// class bounds (protocol.go), the read view, passes, scans, verification and maintenance.
package badgerstore
