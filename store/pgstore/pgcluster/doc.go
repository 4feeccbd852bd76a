// Package pgcluster is the cluster's records on the PostgreSQL database of a pgstore.Store:
// the nodes and their heartbeats (freshq_node, with the capacity figures each publishes), the
// shard leases (freshq_shard_lease), the board of host pauses (freshq_host_pause), and the
// view of them all for people. A Cluster is the cluster capability of a node on PostgreSQL
// (package cluster's Engine, which it satisfies structurally: it imports nothing of freshq's
// domain, only package store's types): the records here, and the shards the store works on
// (SetOwned, OwnedShards, ShardOf), which it forwards to the store, whose transactions are
// fenced by them.
//
// The tables are created by the store's schema (pgschema's migrations 2 to 4); this package
// works on the store's connections (pgstore.Store.Pool) and writes no table of the store's.
//
// # Invariants
//
//   - Every time is the database's clock (clock_timestamp()), so that nodes whose clocks
//     disagree still agree on which heartbeat is fresh and which lease has expired.
//   - An acquire is a conditional update that succeeds only on a lease at the epoch seen that
//     is free, expired or the node's own, and it increments the epoch: a shard has at most one
//     owner at a time.
//   - Lease rows are always locked in shard order, as the store's funnel and advance lock them
//     (FOR SHARE), so that no two of these statements deadlock with the store's.
//   - An identity is held by one incarnation: Register refuses (store.ErrIdentityInUse) while
//     another heartbeat within the TTL and is not stopping, and a heartbeat of an incarnation
//     that lost the identity is refused too.
//   - A pause on the board is only ever lengthened; the board holds the pauses of the last
//     minute.
//   - A view (ClusterView) reads the nodes, the leases and the floors, never the schedule: the
//     rows below the floors are counted by worker 0's alarm only (RowsBelowFloor), so a reader
//     of the view at one a second or a hundred costs the job tables no more than none.
package pgcluster
