// Package engine opens the store engine a node's configuration names (store.backend): it is the
// one place that knows which engine worker 0 runs on. It hands the rest of freshq a store.Store
// and, when the engine offers one, the engine's cluster capability as a cluster.Engine, so that
// nothing outside the engines, the assemblers and tests asserts a store to an engine's type.
//
// Invariants: on PostgreSQL every node is a node of a cluster (alone, it owns every shard), so
// Open returns a cluster.Engine; on Badger it returns none (nil), and the node is alone. Kept
// apart from package assemble so that what imports assemble (the supervisor, the test helpers)
// links no storage engine.
package engine

import (
	"context"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/pgstore/pgcluster"
	"github.com/freshq/freshq/sweep"
)

// The cluster capability package cluster asks of an engine, which pgcluster offers.
var _ cluster.Engine = (*pgcluster.Cluster)(nil)

// Deps are what Open needs beside the configuration.
type Deps struct {
	Floor  store.FloorCell // the node's floor cell, which writes lower and advances raise
	Worker *shm.Worker     // worker 0's block: counts what a cluster's fence refused
	// TestSignals are the PostgreSQL store's test signals: zero in production.
	TestSignals store.TestSignals
	Log         zerolog.Logger
}

// Open opens the backend store.backend names, and its cluster capability: nil on Badger.
//
// On PostgreSQL the store is a cluster's node: it works on the shards its membership gives it
// (cluster.NewNodeMember), and what the fence refused is counted in d.Worker's counters.
func Open(ctx context.Context, cfg *config.Config, d Deps) (store.Store, cluster.Engine, error) {
	pol, err := assemble.Policy(cfg)
	if err != nil {
		return nil, nil, err
	}
	// The class index the sweep reads instead of the whole due set (package sweep); a reload
	// that changes a row's class leaves the sweep on the full pass until restart.
	classifier := sweep.NewClassifier(pol)
	if cfg.Store.Backend == config.StoreBackendPostgres {
		st, err := pgstore.Open(ctx, cfg.Store.Postgres.DSN, &pgstore.Options{
			Shards:               cfg.Store.Postgres.Shards,
			Floor:                d.Floor,
			Logger:               d.Log,
			RefuseImplausibleDue: true,
			Node:                 cfg.NodeID(),
			IdleInTransaction:    cfg.Cluster.LeaseTTL.D() / 2,
			Fenced:               fenced(d.Worker),
			Classifier:           classifier,
			TestSignals:          d.TestSignals,
		})
		if err != nil {
			return nil, nil, err
		}
		return st, pgcluster.New(st, nil), nil
	}
	st, err := badgerstore.Open(filepath.Join(cfg.DataDir, "db"), &badgerstore.Options{
		SyncWrites:           cfg.Store.SyncWrites,
		Floor:                d.Floor,
		GCInterval:           cfg.Store.GCInterval.D(),
		ReadCacheBytes:       readCacheBytes(cfg.Store.ReadCache),
		Logger:               d.Log,
		RefuseImplausibleDue: true,
		Classifier:           classifier,
	})
	if err != nil {
		return nil, nil, err
	}
	return st, nil, nil
}

// fenced counts what a cluster's fence refused in worker 0's counters.
func fenced(w *shm.Worker) func(pgstore.Fenced, int) {
	return func(what pgstore.Fenced, n int) {
		switch what {
		case pgstore.FencedAdvance:
			w.Add(shm.CounterAdvancesFenced, uint64(n))
		case pgstore.FencedResult:
			w.Add(shm.CounterResultsFenced, uint64(n))
		}
	}
}

// readCacheBytes is store.read_cache as the Badger store's option: 0 (none) is its negative.
func readCacheBytes(b config.ByteSize) int64 {
	if b == 0 {
		return -1
	}
	return int64(b)
}
