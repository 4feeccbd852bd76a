package pgcluster

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freshq/freshq/store/pgstore"
)

// Options configures New. The zero value is usable, and it has no field yet.
type Options struct{}

// Cluster is a node's cluster capability on st's database. All methods are safe for
// concurrent use.
type Cluster struct {
	st   *pgstore.Store
	pool *pgxpool.Pool
	opts Options
	// belowFloor is RowsBelowFloor's last count of the rows below each shard's floor, which
	// ClusterView reports.
	belowFloor belowFloorCount
	// viewSlot holds the one view read at a time (ClusterView), so that readers, however many
	// at once, hold at most one of the store's connections.
	viewSlot chan struct{}
}

// New returns the cluster capability of st, on its connections: it lives as long as st.
func New(st *pgstore.Store, opts *Options) *Cluster {
	var o Options
	if opts != nil {
		o = *opts
	}
	return &Cluster{st: st, pool: st.Pool(), opts: o, viewSlot: make(chan struct{}, 1)}
}

// Shards is S, the number of shards keys hash into (pgstore.Store.Shards).
func (c *Cluster) Shards() int { return c.st.Shards() }

// ShardOf is the shard of key (pgstore.Store.ShardOf).
func (c *Cluster) ShardOf(key []byte) int32 { return c.st.ShardOf(key) }

// SetOwned gives the store the shards the node holds (pgstore.Store.SetOwned).
func (c *Cluster) SetOwned(ctx context.Context, shards []int32, epochs []int64) error {
	return c.st.SetOwned(ctx, shards, epochs)
}

// OwnedShards is the shards the store works on now (pgstore.Store.OwnedShards).
func (c *Cluster) OwnedShards() []int32 { return c.st.OwnedShards() }
