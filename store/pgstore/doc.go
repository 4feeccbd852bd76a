// Package pgstore is freshq's schedule store on PostgreSQL (15 or later), through pgx: the same
// contract as the embedded Badger store (store.Store), for a node that must outgrow one
// machine's disk or share its store with other nodes. The conformance suite of store/storetest
// runs against both.
//
// # Tables
//
// The schema is package pgschema's (its doc lists the tables), migrated at Open. Every row
// carries its shard, hash(cache_key) mod S (Shard), with S fixed when the schema is created.
// The cluster's own tables (nodes, shard leases, host pauses) are kept by package pgcluster on
// this store's connections (Pool): this package imports nothing of freshq's domain.
//
// # Shards owned by a node
//
// A store opened with Options.Node is a node of a cluster (package cluster keeps its leases in
// pgcluster's records): it works only on the shards SetOwned gives it, each at the epoch of its
// lease. A pass reads a shard's rows only if its snapshot shows the node holding the shard at
// that epoch; an advance and a result lock the shard's lease row (FOR SHARE, after the floor
// rows) and act only on the shards still held, so an acquire by another node, which updates the
// row, waits for them to commit, and they change nothing of a shard the node lost. Writes are
// not fenced: they go to any shard and lower that shard's own floor. Without Options.Node the
// store is alone and works on every shard.
//
// # The floor (F1) on PostgreSQL
//
// The floor is per shard and lives in freshq_floor. Every funnel transaction first locks the
// floor rows of the shards it writes (SELECT … ORDER BY shard FOR UPDATE), then lowers each to
// the earliest due time it files in that shard, all before it commits. A floor advance locks
// the floor rows the same way, and only then, in a new statement, reads each shard's earliest
// due row. PostgreSQL's row locks serialise the two: an advance waits for every write that
// holds a shard's lock to commit, and under READ COMMITTED its next statement sees those
// writes; a write that has not locked the shard yet will lower the advanced floor itself when
// it does. So after any advance no row is due below its shard's floor, however writes and
// advances interleave, and whichever process or node executes the write. The locks are taken
// in shard order by both sides, so they cannot deadlock on each other.
//
// The shared-memory floor cell of the node (Options.Floor) mirrors the minimum over the shards
// for the claim path: a write lowers it after it has locked its shards and before it commits;
// an advance raises it by compare-and-swap from the value it read before taking the locks, so
// a write that lowered it meanwhile makes the advance of the cell fail, never strand a row.
// The advance swaps while it still holds every shard's lock (before it commits): after its
// commit a write could lock a shard, file a row above the old cell but below the new one, and
// find nothing to lower. The head follows the same rule without the guard.
//
// # Writes
//
// One committer goroutine gathers concurrent funnel calls into one transaction (group commit),
// as the Badger store does. It reads every row the batch replaces, and the targets its
// Modify changes decide on, in one round trip; decides; and writes rows, targets, pages and
// floors with one statement each. A transaction commits all of a batch or none of it, so a
// funnel call on PostgreSQL never fails part-way (no store.PartialWriteError). The floor locks
// also make every read-decide-write of a shard exclusive against every other writer, in this
// process or another.
//
// # The class index
//
// Given Options.Classifier (worker 0's), the store files each row with its sweep class, stamped
// with the epoch of the classifier that computed it, and its passes are store.ClassPasses over
// the class index; rows of another epoch are moved into the node's by a background
// reclassifier, and until then a pass offers no class index (classindex.go: C1, C2).
//
// Worker 0's store also vacuums the schedule table once renders have left dead tuples of 1 %
// of it (vacuum.go): the dead index entries lie at the heads every pass reads, and autovacuum's
// defaults let them grow with the table.
//
// # PostgreSQL-specific
//
// Plain SQL throughout; no LISTEN/NOTIFY and no advisory locks. What a PostgreSQL-compatible
// engine must also provide: SELECT … FOR UPDATE row locks held to commit, READ COMMITTED with
// a new snapshot per statement, REPEATABLE READ snapshots for a pass, INSERT … ON CONFLICT,
// unnest of arrays, bytea ordering by bytes, and covering indexes (INCLUDE). docs/postgres.md
// lists them with what each is used for.
package pgstore
