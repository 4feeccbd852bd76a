// Package pgschema is the schema of freshq's PostgreSQL store and its physical upkeep: the SQL
// files of migrations/, embedded in the binary; Migrate, which brings a database to the newest
// of them when a store opens (pgstore.Open); and VacuumIfDead, the schedule table's vacuum
// (vacuum.go says why autovacuum is not enough). Both store/pgstore and store/pgstore/pgcluster
// work on the tables it creates:
//
//	freshq_meta      name → value: the schema version and the shard count S
//	freshq_floor     shard → floor_ms: no schedule row of the shard is due below it
//	freshq_schedule  cache_key → shard, due_at_ms, projection (flags, intervals), class
//	                 due index (shard, due_at_ms) INCLUDE the projection
//	                 class index (class, due_at_ms, cache_key) INCLUDE shard, projection
//	freshq_target    cache_key → store.Target's binary value
//	freshq_page      cache_key → store.Page's binary value
//
//	freshq_node         node_id → addr, incarnation, heartbeat_at, stopping, capacity   (a cluster's nodes)
//	freshq_shard_lease  shard → owner, epoch, expires_at                                (who owns each shard)
//	freshq_host_pause   host → paused_until, status                                     (the hosts' pauses)
//
// # Invariants
//
//   - A migration's version is the number its file's name starts with; versions run 1, 2, 3, …
//     without gaps, and each is applied in its own transaction with the version it reaches.
//   - Two nodes migrating at once are serialised by a table lock on freshq_meta (plain SQL, no
//     advisory lock); the second finds the work done.
//   - S is written once, by the first migration, and never changes.
//   - A database whose version is newer than the newest file is refused (ErrTooNew): this
//     binary must not write to a schema it does not know.
package pgschema
