package store

import (
	"errors"
	"time"
)

// The records of a cluster: the nodes that share one database and the leases by which they
// divide its shards. An engine whose nodes share a database (store/pgstore) keeps them; package
// cluster decides on them through its own contract (cluster.Registry, cluster.Engine), whose
// methods speak only of these types, so that the engine imports nothing of the cluster.

// ErrIdentityInUse is returned when a live process already holds the node's identity
// (node.id), or took it over since this process registered.
var ErrIdentityInUse = errors.New("cluster: node id is held by another live process")

// NodeRecord is one node's record.
type NodeRecord struct {
	ID          string
	Addr        string
	StartedAt   time.Time
	HeartbeatAt time.Time
	Stopping    bool
}

// LeaseRecord is one shard's lease. Owner is "" for a shard handed over or never owned.
type LeaseRecord struct {
	Shard     int32
	Owner     string
	Epoch     int64
	ExpiresAt time.Time
}

// Membership is the cluster as the database shows it, with the database's clock.
type Membership struct {
	Now    time.Time
	Nodes  []NodeRecord
	Leases []LeaseRecord // one per shard, ascending
}

// ClusterView is the cluster as the database stands at NowMs (its own clock, which stamps
// every heartbeat and lease), for people and metrics: the nodes, by id, and every shard's lease
// and floor, by shard. The shards' RowsBelowFloor are as counted at RowsBelowFloorAtMs, on the
// same clock, no later than NowMs: worker 0's last count (its alarm's, after a sweep), which a
// view only reports, never takes; 0 and none before the first.
type ClusterView struct {
	NowMs              int64
	RowsBelowFloorAtMs int64
	Nodes              []ClusterNode
	Shards             []ClusterShard
}

// ClusterNode is one node of a ClusterView. Live: its heartbeat is younger than the lease TTL
// the view was asked with (a stopping node may still be live). Shards: the leases it holds
// unexpired at NowMs. Capacity: the figures it published with its last heartbeat (JSON, as
// the node's heartbeat wrote them), nil when unknown.
type ClusterNode struct {
	ID            string
	Addr          string
	StartedAtMs   int64
	HeartbeatAtMs int64
	Live          bool
	Stopping      bool
	Shards        int
	Capacity      []byte
}

// ClusterShard is one shard's lease with the shard's floor. Owner is "" when the lease names
// nobody (never acquired, or handed over); a lease that expired before NowMs still names the
// node that last held it. ExpiresAtMs is 0 for a shard never acquired. RowsBelowFloor counts
// the shard's rows due below its floor, up to the engine's bound.
type ClusterShard struct {
	Shard          int
	Owner          string
	Epoch          int64
	ExpiresAtMs    int64
	FloorMs        int64
	RowsBelowFloor int
}
