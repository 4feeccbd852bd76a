package main

import (
	"context"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
)

// openStore opens the backend store.backend names. This is the one place that knows which
// backend worker 0 runs on; everything it hands the store to sees a store.Store.
func openStore(ctx context.Context, cfg *config.Config, floor store.FloorCell, log zerolog.Logger) (store.Store, error) {
	if cfg.Store.Backend == config.StoreBackendPostgres {
		return pgstore.Open(ctx, cfg.Store.Postgres.DSN, &pgstore.Options{
			Shards:               cfg.Store.Postgres.Shards,
			Floor:                floor,
			Logger:               log,
			RefuseImplausibleDue: true,
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
