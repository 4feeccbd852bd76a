package capacity

import (
	"encoding/json"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// ShardOwner is a cluster node's store as the capacity accounting sees it (cluster.Engine is
// one): the shard of a key, and the shards the node holds now.
type ShardOwner interface {
	ShardOf(key []byte) int32
	OwnedShards() []int32
}

// InCluster makes s a cluster node's capacity accounting when o is not nil: its demand counts
// the shards the node holds (so the nodes' demands add up to the farm's, every shard once) and
// its recount reads only those. A no-op with a nil o (a node alone on its store).
func (s *Service) InCluster(o ShardOwner) {
	if o == nil {
		return
	}
	s.Ledger.SetShards(o.ShardOf, o.OwnedShards)
	s.Shards = func() int { return len(o.OwnedShards()) }
}

// FiguresJSON is Figures as a cluster node publishes them with its heartbeat: a JSON object,
// or nil when they do not encode (unknown this tick, rather than a wrong figure).
func (s *Service) FiguresJSON() []byte {
	b, err := json.Marshal(s.Figures())
	if err != nil {
		return nil
	}
	return b
}

// FarmOf is the farm's capacity over a cluster view's live nodes: their published figures
// summed and projected with boost (the policy in force, read at each view) by Farm. A node's
// figures that do not decode are unknown.
func FarmOf(boost func() float64) func(v *store.ClusterView) *wire.FarmCapacity {
	return func(v *store.ClusterView) *wire.FarmCapacity {
		var nodes []wire.FarmNode
		for _, n := range v.Nodes {
			if !n.Live || n.Stopping {
				continue
			}
			fn := wire.FarmNode{ID: n.ID}
			if n.Capacity != nil {
				var f wire.NodeCapacity
				if json.Unmarshal(n.Capacity, &f) == nil {
					fn.Capacity = &f
				}
			}
			nodes = append(nodes, fn)
		}
		f := Farm(nodes, boost())
		f.NowMs = v.NowMs
		return &f
	}
}
