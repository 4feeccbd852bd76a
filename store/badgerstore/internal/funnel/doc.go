// Package funnel is badgerstore's write funnel: the only code that writes to the store's
// Badger database. It alone writes the s/ and d/ prefixes, and the class index's c/
// (badgerstore's TestFunnelIsTheOnlyWriter parses the engine's source to prove it), so the two
// invariants of the keyspace hold by construction:
//
//   - a schedule row and its due-index entry (d/, or c/ in a store with a classifier) change
//     in one transaction: the old entry (found from the row as the transaction sees it) is
//     deleted and the new one set, so there is never an index entry without its row or a row
//     without its index entry;
//   - every put states submitted and the effective interval (Schedule can only be built by
//     NewSchedule), because a put replaces the record and an omitted field would silently
//     erase a correct value.
//
// Group commit. Callers enqueue requests; one committer goroutine takes the first waiting
// request, gathers whatever else is already queued (up to Config.MaxBatchWrites writes), and
// applies the batch in as few Badger transactions as fit (a transaction holds at most 15 % of a
// memtable; the batch is cut before ErrTxnTooBig, and re-cut if Badger disagrees). Writes apply
// in arrival order, so two writes of one key in one batch end as the later one. Each caller
// is acknowledged only after every transaction holding its writes has committed.
//
// Floor. Before the first transaction of a batch commits, the committer registers the batch
// and lowers the floor to the batch's earliest new due time (Protocol.BeginBatch), inside the
// critical section it shares with sweep passes (badgerstore's protocol.go), and lowers the
// class bounds of the classes it files rows under (Protocol.LowerClassBounds, B1). A batch is
// unregistered (Protocol.EndBatch) only after its last transaction completed.
//
// Reads. When a transaction commits, the funnel has the store publish a fresh read view
// (Protocol.Committed) before the next transaction is submitted and before any caller is
// acknowledged, and it brackets the commit for the read cache (readcache.Cache Begin/End).
// It keeps K1 and H1 of the key filter (package keyfilter) by adding every key whose row it
// creates, and RH1 of the row hints (hints.go) by dropping a key's hint whenever it stages a
// write of the key.
//
// OpenIndex holds the writes made outside a batch: at Open, before Start, the due index is
// made to agree with the store's classifier.
package funnel
