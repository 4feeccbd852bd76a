package main

import (
	"context"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/wire"
)

// openStore opens the backend store.backend names. This is the one place that knows which
// backend worker 0 runs on; everything it hands the store to sees a store.Store.
//
// On PostgreSQL the store is a cluster's node: it works on the shards its membership gives it
// (newMember), and fenced tells worker 0's counters what the fence refused; clusterView reads
// the cluster from it.
func openStore(ctx context.Context, cfg *config.Config, floor store.FloorCell, fenced func(pgstore.Fenced, int), log zerolog.Logger) (store.Store, error) {
	pol, err := assemble.Policy(cfg)
	if err != nil {
		return nil, err
	}
	// The class index the sweep reads instead of the whole due set (package sweep); a reload
	// that changes a row's class leaves the sweep on the full pass until restart.
	classifier := sweep.NewClassifier(pol)
	if cfg.Store.Backend == config.StoreBackendPostgres {
		return pgstore.Open(ctx, cfg.Store.Postgres.DSN, &pgstore.Options{
			Shards:               cfg.Store.Postgres.Shards,
			Floor:                floor,
			Logger:               log,
			RefuseImplausibleDue: true,
			Node:                 cfg.NodeID(),
			IdleInTransaction:    cfg.Cluster.LeaseTTL.D() / 2,
			Fenced:               fenced,
			Classifier:           classifier,
			TestSignals:          pgTestSignals(),
		})
	}
	return badgerstore.Open(filepath.Join(cfg.DataDir, "db"), &badgerstore.Options{
		SyncWrites:           cfg.Store.SyncWrites,
		Floor:                floor,
		GCInterval:           cfg.Store.GCInterval.D(),
		ReadCacheBytes:       readCacheBytes(cfg.Store.ReadCache),
		Logger:               log,
		RefuseImplausibleDue: true,
		Classifier:           classifier,
	})
}

// clusterView reads the cluster for GET /v1/cluster and /v1/queue when st is on PostgreSQL,
// where every node is in a cluster (one node alone owns every shard); nil on Badger. The node's
// identity and cluster.lease_ttl need a restart to change, so they are read once. The farm's
// capacity is the live nodes' published figures, summed and projected with boost (the policy
// in force).
func clusterView(st store.Store, cfg *config.Config, boost func() float64) api.ClusterViewFunc {
	pg, ok := st.(*pgstore.Store)
	if !ok {
		return nil
	}
	self, ttl := cfg.NodeID(), cfg.Cluster.LeaseTTL.D()
	return func(ctx context.Context) (wire.ClusterView, error) {
		v, err := pg.ClusterView(ctx, ttl)
		if err != nil {
			return wire.ClusterView{Self: self}, err
		}
		out := wire.ClusterView{Self: self, LeaseTTLMs: ttl.Milliseconds(), NowMs: v.NowMs, RowsBelowFloorAtMs: v.RowsBelowFloorAtMs,
			Nodes: make([]wire.ClusterNode, len(v.Nodes)), Shards: make([]wire.ClusterShard, len(v.Shards))}
		for i, n := range v.Nodes {
			out.Nodes[i] = wire.ClusterNode{ID: n.ID, Addr: n.Addr, StartedAtMs: n.StartedAtMs, HeartbeatAtMs: n.HeartbeatAtMs,
				Live: n.Live, Stopping: n.Stopping, Shards: n.Shards}
		}
		out.Farm = farmOf(&v, boost())
		for i, s := range v.Shards {
			out.Shards[i] = wire.ClusterShard(s)
		}
		return out, nil
	}
}

// readCacheBytes is store.read_cache as the Badger store's option: 0 (none) is its negative.
func readCacheBytes(b config.ByteSize) int64 {
	if b == 0 {
		return -1
	}
	return int64(b)
}
