package pgcluster

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freshq/freshq/store/pgstore"
)

// DefaultBelowFloorRecount is how often ClusterView counts the rows below the floors, as
// often as worker 0 counts its own (freshq_below_floor).
const DefaultBelowFloorRecount = 10 * time.Second

// Options configures New. The zero value is usable.
type Options struct {
	// BelowFloorRecount is how often ClusterView counts each shard's rows below its floor
	// (zero or negative: DefaultBelowFloorRecount). Between counts a view
	// reports the last one. The count reads the due index from the bottom of each shard, and
	// below the floor lie the index entries of every row rendered since the table's last
	// vacuum: 219 ms a view at 2,000,000 rows, which a scrape of /metrics and every refresh of
	// `freshqctl top` would pay.
	BelowFloorRecount time.Duration
	// Now is the clock BelowFloorRecount is measured on (default time.Now). Tests inject one.
	Now func() time.Time
}

// Cluster is a node's cluster capability on st's database. All methods are safe for
// concurrent use.
type Cluster struct {
	st   *pgstore.Store
	pool *pgxpool.Pool
	opts Options
	// belowFloor is ClusterView's last count of the rows below each shard's floor.
	belowFloor belowFloorCount
}

// New returns the cluster capability of st, on its connections: it lives as long as st.
func New(st *pgstore.Store, opts *Options) *Cluster {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.BelowFloorRecount <= 0 {
		o.BelowFloorRecount = DefaultBelowFloorRecount
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Cluster{st: st, pool: st.Pool(), opts: o}
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
