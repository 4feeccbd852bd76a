package cluster

import (
	"context"
	"time"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// StatusView reads the cluster for GET /v1/cluster and /v1/queue (api.ClusterViewFunc) from
// eng: nil when eng is nil (the embedded store; on PostgreSQL every node is in a cluster, one
// node alone owning every shard). self is the node's identity and ttl cluster.lease_ttl, both
// fixed until a restart. farm is the farm's capacity over the view's live nodes
// (capacity.FarmOf).
func StatusView(eng Engine, self string, ttl time.Duration, farm func(*store.ClusterView) *wire.FarmCapacity) func(context.Context) (wire.ClusterView, error) {
	if eng == nil {
		return nil
	}
	return func(ctx context.Context) (wire.ClusterView, error) {
		v, err := eng.ClusterView(ctx, ttl)
		if err != nil {
			return wire.ClusterView{Self: self}, err
		}
		out := wire.ClusterView{Self: self, LeaseTTLMs: ttl.Milliseconds(), NowMs: v.NowMs, RowsBelowFloorAtMs: v.RowsBelowFloorAtMs,
			Nodes: make([]wire.ClusterNode, len(v.Nodes)), Shards: make([]wire.ClusterShard, len(v.Shards))}
		for i, n := range v.Nodes {
			out.Nodes[i] = wire.ClusterNode{ID: n.ID, Addr: n.Addr, StartedAtMs: n.StartedAtMs, HeartbeatAtMs: n.HeartbeatAtMs,
				Live: n.Live, Stopping: n.Stopping, Shards: n.Shards}
		}
		out.Farm = farm(&v)
		for i, s := range v.Shards {
			out.Shards[i] = wire.ClusterShard(s)
		}
		return out, nil
	}
}
