package main

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/wire"
)

// clusterCapacity makes svc a cluster node's capacity accounting when st is on PostgreSQL: its
// demand counts the shards the node holds (so the nodes' demands add up to the farm's, every
// shard once) and its recount reads only those. A no-op on Badger.
func clusterCapacity(st store.Store, svc *capacity.Service) {
	pg, ok := st.(*pgstore.Store)
	if !ok {
		return
	}
	n := pg.Shards()
	svc.Ledger.SetShards(func(key []byte) int32 { return pgstore.Shard(key, n) }, pg.OwnedShards)
	svc.Shards = func() int { return len(pg.OwnedShards()) }
}

// publishCapacity makes opts publish svc's figures with every heartbeat, and ask svc for a
// recount when the shards the node holds change (a shard taken over is counted within
// capacity.NudgeDelay, not at the next periodic recount).
func publishCapacity(opts *cluster.Options, svc *capacity.Service) {
	if svc == nil {
		return
	}
	opts.Figures = func() []byte {
		b, err := json.Marshal(svc.Figures())
		if err != nil {
			return nil // unknown this tick, rather than a wrong figure
		}
		return b
	}
	owned := opts.Owned
	var mu sync.Mutex
	var last []int32
	opts.Owned = func(ctx context.Context, shards []int32, epochs []int64) error {
		err := owned(ctx, shards, epochs)
		mu.Lock()
		changed := !slices.Equal(last, shards)
		last = slices.Clone(shards)
		mu.Unlock()
		if changed {
			svc.Nudge()
		}
		return err
	}
}

// farmOf is the farm's capacity over the view's live nodes: their published figures summed
// and projected with boost (capacity.Farm). A node's figures that do not decode are unknown.
func farmOf(v *pgstore.ClusterView, boost float64) *wire.FarmCapacity {
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
	f := capacity.Farm(nodes, boost)
	f.NowMs = v.NowMs
	return &f
}
