package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// PathCluster is the cluster view, served by worker 0 on PostgreSQL (every node of a cluster
// answers it) and proxied by the supervisor.
const PathCluster = "/v1/cluster"

// ClusterView answers GET /v1/cluster: the nodes of the cluster and the lease of every shard,
// as the database stood at NowMs (the database's clock, which every lease and heartbeat is
// stamped with, so ages are read against it and not against the asking machine's clock).
type ClusterView struct {
	Self       string         `json:"self"`         // the answering node's node.id
	LeaseTTLMs int64          `json:"lease_ttl_ms"` // cluster.lease_ttl of the answering node
	NowMs      int64          `json:"now_ms"`
	Nodes      []ClusterNode  `json:"nodes"`  // by id
	Shards     []ClusterShard `json:"shards"` // by shard
	// RowsBelowFloorAtMs is when the shards' rows_below_floor were counted (the database's
	// clock): worker 0 counts them after a sweep, at most every 10 s; a view never counts, it
	// repeats the last count (0: none yet).
	RowsBelowFloorAtMs int64 `json:"rows_below_floor_at_ms"`
	// Farm is the whole farm's capacity: the sum of the figures the live nodes publish with
	// their heartbeats, and its projection. Every node reads the same rows, so every node
	// answers the same sum (as of the heartbeats it read).
	Farm *FarmCapacity `json:"farm,omitempty"`
}

// NodeCapacity is what a node of a cluster publishes of its capacity with each heartbeat (its
// row of freshq_node): the demand of the shards it holds, by class (what the projection needs),
// the renders it measured over its meter's window, and its backlog. A node publishes none
// before its first heartbeat, and a node of an older version never: its figures are unknown,
// which is not zero.
type NodeCapacity struct {
	AtMs            int64         `json:"at_ms"`  // the node's clock when it computed them
	Shards          int           `json:"shards"` // shards held, whose rows the demand counts
	DemandPerSecond float64       `json:"demand_per_second"`
	DemandRows      int64         `json:"demand_rows"`
	Classes         []DemandClass `json:"classes"`
	// CapacityPerSecond is the renders the node completed per second over WindowS (the meter's
	// window, shorter since its start); Renders counts them. RetryShare and RecheckShare are
	// the shares of them that were retries of failing rows and rechecks of sealed targets.
	CapacityPerSecond float64 `json:"capacity_per_second"`
	RetryShare        float64 `json:"retry_share"`
	RecheckShare      float64 `json:"recheck_share"`
	Renders           int64   `json:"renders"`
	WindowS           float64 `json:"window_s"`
	Backlog           uint64  `json:"backlog"` // due rows of its shards at its last sweep
	RecountedAtMs     int64   `json:"recounted_at_ms"`
	RecountDrift      float64 `json:"recount_drift"`
}

// DemandClass is the demand of one lane, route and submitted fact, in renders per second.
type DemandClass struct {
	Lane      string  `json:"lane"`
	Route     string  `json:"route"` // "" is the rows no route matches
	Submitted bool    `json:"submitted"`
	Rows      int64   `json:"rows"`
	PerSecond float64 `json:"per_second"`
}

// FarmCapacity is the capacity of the whole farm: Capacity's demand, capacity and projection
// over the summed figures of the live nodes that published theirs (Reporting of Nodes; the
// others are named in Unknown and left out of the sum, not counted as 0). The demands add up
// (each node counts the shards it holds); the capacities add up; the retry and recheck shares
// are weighted by each node's renders per second; the backlogs add up. recounted_at_ms is the
// oldest of the nodes' recounts, recount_drift the sum of their drifts. PerNode is every live
// node's own figures, by id.
type FarmCapacity struct {
	Nodes     int        `json:"nodes"`
	Reporting int        `json:"reporting"`
	Unknown   []string   `json:"unknown,omitempty"`
	PerNode   []FarmNode `json:"per_node"`
	Capacity
}

// FarmNode is one live node's figures in a FarmCapacity; Capacity is nil when unknown.
type FarmNode struct {
	ID       string        `json:"id"`
	Capacity *NodeCapacity `json:"capacity"`
}

// ClusterNode is one node's heartbeat row. Live: its heartbeat is younger than the lease TTL.
// Stopping: it is handing its shards over (shards go only to live nodes that are not stopping).
// Shards counts the leases it holds unexpired.
type ClusterNode struct {
	ID            string `json:"id"`
	Addr          string `json:"addr"`
	StartedAtMs   int64  `json:"started_at_ms"`
	HeartbeatAtMs int64  `json:"heartbeat_at_ms"`
	Live          bool   `json:"live"`
	Stopping      bool   `json:"stopping"`
	Shards        int    `json:"shards"`
}

// ClusterShard is one shard's lease and floor. Owner is empty for a shard never acquired or
// handed over; a lease whose ExpiresAtMs is not after the view's NowMs is held by nobody,
// whatever Owner says (the owner stopped renewing and nobody has taken it yet). ExpiresAtMs is
// 0 for a shard never acquired. RowsBelowFloor counts rows of the shard due below its floor,
// up to a bound per shard (1,000: one bounded read of the due index a shard, so that the view
// of a broken database stays cheap); anything but 0 is a bug.
type ClusterShard struct {
	Shard          int    `json:"shard"`
	Owner          string `json:"owner,omitempty"`
	Epoch          int64  `json:"epoch"`
	ExpiresAtMs    int64  `json:"expires_at_ms"`
	FloorMs        int64  `json:"floor_ms"`
	RowsBelowFloor int    `json:"rows_below_floor"`
}

// QueueCluster is the cluster section of GET /v1/queue on PostgreSQL: the shards this node
// holds, each with its epoch and floor, and the rows below their floors (the sum, as bounded per
// shard). Error says why the section could not be read from the database, when it could not.
type QueueCluster struct {
	Node           string `json:"node"`
	ShardsOwned    int    `json:"shards_owned"`
	RowsBelowFloor int    `json:"rows_below_floor"`
	// RowsBelowFloorAtMs is when they were counted, as ClusterView's.
	RowsBelowFloorAtMs int64        `json:"rows_below_floor_at_ms"`
	Shards             []OwnedShard `json:"shards"`
	Error              string       `json:"error,omitempty"`
	// Farm is how the node divides the hosts' limits with the other live nodes.
	Farm *QueueFarm `json:"farm,omitempty"`
	// Capacity is the whole farm's capacity, as GET /v1/cluster's farm.
	Capacity *FarmCapacity `json:"capacity,omitempty"`
}

// QueueFarm is a node's membership as the division of every host's limit reads it: the node
// is Index of Nodes live nodes (sorted by id) since SinceMs (the node's clock); Nodes 0 before
// its first tick, or when it is not among the live nodes: it then holds no share of any host.
// A share that grows waits GraceMs after the change (a node that joined others holds none
// until then); a remainder rotates every RoundMs.
type QueueFarm struct {
	Index   int   `json:"index"`
	Nodes   int   `json:"nodes"`
	SinceMs int64 `json:"since_ms"`
	GraceMs int64 `json:"grace_ms"`
	RoundMs int64 `json:"round_ms"`
}

// OwnedShard is one shard a node holds, in its QueueCluster.
type OwnedShard struct {
	Shard          int   `json:"shard"`
	Epoch          int64 `json:"epoch"`
	FloorMs        int64 `json:"floor_ms"`
	RowsBelowFloor int   `json:"rows_below_floor"`
}

// Cluster reads worker 0's cluster view. A node that is not in a cluster (Badger) answers 404,
// a *StatusError with Code 404.
func (c *Client) Cluster(ctx context.Context) (ClusterView, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://worker0"+PathCluster, nil)
	if err != nil {
		return ClusterView{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return ClusterView{}, fmt.Errorf("%w: %s: %v", ErrUnavailable, PathCluster, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return ClusterView{}, &StatusError{Path: PathCluster, Code: resp.StatusCode, Msg: string(msg)}
	}
	var v ClusterView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return ClusterView{}, fmt.Errorf("%w: %s: bad response: %v", ErrUnavailable, PathCluster, err)
	}
	return v, nil
}
