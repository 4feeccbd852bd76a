package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/wire"
)

// ClusterViewFunc reads the cluster from the database: worker 0's store on PostgreSQL, with the
// node's identity and lease TTL filled in (cmd/worker builds it).
type ClusterViewFunc func(ctx context.Context) (wire.ClusterView, error)

// Cluster serves GET /v1/cluster. View is nil on a node that is in no cluster (Badger), which
// answers 404 saying so.
type Cluster struct {
	View ClusterViewFunc
}

// errNotClustered is GET /v1/cluster on Badger.
var errNotClustered = errors.New("this node is not in a cluster (store.backend is badger)")

// Register adds the endpoint to mux.
func (c *Cluster) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+wire.PathCluster, func(w http.ResponseWriter, r *http.Request) {
		if c.View == nil {
			fail(w, errNotClustered)
			return
		}
		v, err := c.View(r.Context())
		if err != nil {
			fail(w, &intake.StoreError{Err: err})
			return
		}
		ok(w, v)
	})
}

// ownSection is the node's part of v for /v1/queue: the leases v.Self holds unexpired at
// v.NowMs (a lease that expired still names its last owner, which holds it no more), and the
// farm's capacity as /v1/cluster has it.
func ownSection(v wire.ClusterView) *wire.QueueCluster {
	c := &wire.QueueCluster{Node: v.Self, Shards: []wire.OwnedShard{}, Capacity: v.Farm, RowsBelowFloorAtMs: v.RowsBelowFloorAtMs}
	for _, s := range v.Shards {
		if s.Owner != v.Self || s.ExpiresAtMs <= v.NowMs {
			continue
		}
		c.Shards = append(c.Shards, wire.OwnedShard{Shard: s.Shard, Epoch: s.Epoch, FloorMs: s.FloorMs, RowsBelowFloor: s.RowsBelowFloor})
		c.RowsBelowFloor += s.RowsBelowFloor
	}
	c.ShardsOwned = len(c.Shards)
	return c
}
