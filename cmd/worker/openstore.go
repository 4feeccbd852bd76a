package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
)

// floorOnWriterEnv is the test switch of pgstore.Options.TestFloorOnWriter: "1" makes every
// write lower its writer's floor instead of its owner's, the defect a cluster test must catch.
const floorOnWriterEnv = "FRESHQ_TEST_FLOOR_ON_WRITER"

// openStore opens the backend store.backend names. This is the one place that knows which
// backend worker 0 runs on; everything it hands the store to sees a store.Store.
//
// On PostgreSQL the store is a cluster's node: it works on the shards its membership gives it
// (newMember), and fenced tells worker 0's counters what the fence refused.
func openStore(ctx context.Context, cfg *config.Config, floor store.FloorCell, fenced func(pgstore.Fenced, int), log zerolog.Logger) (store.Store, error) {
	if cfg.Store.Backend == config.StoreBackendPostgres {
		return pgstore.Open(ctx, cfg.Store.Postgres.DSN, &pgstore.Options{
			Shards:               cfg.Store.Postgres.Shards,
			Floor:                floor,
			Logger:               log,
			RefuseImplausibleDue: true,
			Node:                 cfg.NodeID(),
			Fenced:               fenced,
			TestFloorOnWriter:    os.Getenv(floorOnWriterEnv) == "1",
		})
	}
	return store.Open(filepath.Join(cfg.DataDir, "db"), &store.Options{
		SyncWrites:           cfg.Store.SyncWrites,
		Floor:                floor,
		GCInterval:           cfg.Store.GCInterval.D(),
		Logger:               log,
		RefuseImplausibleDue: true,
	})
}
