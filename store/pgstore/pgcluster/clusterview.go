package pgcluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freshq/freshq/store"
)

// MaxRowsBelowFloorCounted bounds store.ClusterShard.RowsBelowFloor: each shard's count is one
// read of the due index (shard, due_at_ms) that stops there, so that the view of a database
// where the floor protocol broke reads at most this many live rows a shard, not the table. The
// dead index entries below the floor it steps over whatever the bound, which is why it runs at
// most every Options.BelowFloorRecount.
const MaxRowsBelowFloorCounted = 1000

// msOf is the SQL of a timestamptz column in milliseconds since the epoch, 0 for ±infinity
// (a lease never acquired expires at -infinity, which no bigint holds).
func msOf(col string) string {
	return `CASE WHEN isfinite(` + col + `) THEN floor(extract(epoch FROM ` + col + `) * 1000)::bigint ELSE 0 END`
}

var (
	clusterNodesSQL = `SELECT node_id, addr, ` + msOf("started_at") + `, ` + msOf("heartbeat_at") + `,
		heartbeat_at > $1::timestamptz - $2::bigint * interval '1 millisecond', stopping,
		(SELECT count(*) FROM freshq_shard_lease l WHERE l.owner = n.node_id AND l.expires_at > $1::timestamptz),
		capacity::text
		FROM freshq_node n ORDER BY node_id`
	clusterShardsSQL = `SELECT l.shard, coalesce(l.owner, ''), l.epoch, ` + msOf("l.expires_at") + `, coalesce(f.floor_ms, 0)
		FROM freshq_shard_lease l LEFT JOIN freshq_floor f ON f.shard = l.shard ORDER BY l.shard`
	// Each shard's count is a LIMIT-ed read of the due index.
	belowFloorSQL = `SELECT f.shard,
		(SELECT count(*) FROM (SELECT 1 FROM freshq_schedule s WHERE s.shard = f.shard AND s.due_at_ms < f.floor_ms LIMIT $1) b)
		FROM freshq_floor f`
)

// belowFloorCount is the last count of the rows below each shard's floor: the shards that had
// any, when Options.Now said at, and the view's NowMs then. ClusterView holds mu for the
// whole view, so views are taken one at a time: views asked for at once count once, and a view
// that repeats a count began its snapshot after the count's (RowsBelowFloorAtMs ≤ NowMs).
type belowFloorCount struct {
	mu      sync.Mutex
	counted bool
	at      time.Time
	atMs    int64
	shards  map[int]int
}

// rowsBelowFloor returns the count of the rows below each shard's floor and the database's
// clock when it was taken: the last count while it is younger than Options.BelowFloorRecount
// (and the clock has not gone back), else a fresh one read in tx, whose clock is nowMs. The
// caller holds c.belowFloor.mu.
func (c *Cluster) rowsBelowFloor(ctx context.Context, tx pgx.Tx, nowMs int64) (map[int]int, int64, error) {
	b := &c.belowFloor
	now := c.opts.Now()
	if b.counted && !now.Before(b.at) && now.Sub(b.at) < c.opts.BelowFloorRecount {
		return b.shards, b.atMs, nil
	}
	rows, err := tx.Query(ctx, belowFloorSQL, MaxRowsBelowFloorCounted)
	if err != nil {
		return nil, 0, err
	}
	shards := map[int]int{}
	var shard, n int
	if _, err := pgx.ForEachRow(rows, []any{&shard, &n}, func() error {
		if n > 0 {
			shards[shard] = n
		}
		return nil
	}); err != nil {
		return nil, 0, err
	}
	b.counted, b.at, b.atMs, b.shards = true, now, nowMs, shards
	return shards, nowMs, nil
}

// ClusterView reads the nodes and the shard leases from one snapshot, with the database's
// clock at its start as NowMs, for people and metrics (the cluster's own decisions read
// ReadView). The rows below each shard's floor are counted in that snapshot too when the last
// count is Options.BelowFloorRecount old; otherwise they are the last count's
// (RowsBelowFloorAtMs). Views are taken one at a time. A node is live while its heartbeat is
// younger than leaseTTL (cluster.lease_ttl); the cluster gives shards only to the live nodes
// that are not stopping.
func (c *Cluster) ClusterView(ctx context.Context, leaseTTL time.Duration) (store.ClusterView, error) {
	if c.st.Closed() {
		return store.ClusterView{}, store.ErrClosed
	}
	c.belowFloor.mu.Lock()
	defer c.belowFloor.mu.Unlock()
	tx, err := c.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return store.ClusterView{}, fmt.Errorf("pgstore: cluster view: %w", err)
	}
	defer tx.Rollback(ctx)
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return store.ClusterView{}, fmt.Errorf("pgstore: cluster view: the clock: %w", err)
	}
	v := store.ClusterView{NowMs: now.UnixMilli()}
	rows, err := tx.Query(ctx, clusterNodesSQL, now, leaseTTL.Milliseconds())
	if err != nil {
		return store.ClusterView{}, fmt.Errorf("pgstore: cluster view: nodes: %w", err)
	}
	v.Nodes, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ClusterNode, error) {
		var n store.ClusterNode
		var capacity *string
		err := r.Scan(&n.ID, &n.Addr, &n.StartedAtMs, &n.HeartbeatAtMs, &n.Live, &n.Stopping, &n.Shards, &capacity)
		if capacity != nil {
			n.Capacity = []byte(*capacity)
		}
		return n, err
	})
	if err != nil {
		return store.ClusterView{}, fmt.Errorf("pgstore: cluster view: nodes: %w", err)
	}
	rows, err = tx.Query(ctx, clusterShardsSQL)
	if err != nil {
		return store.ClusterView{}, fmt.Errorf("pgstore: cluster view: shards: %w", err)
	}
	v.Shards, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ClusterShard, error) {
		var sh store.ClusterShard
		err := r.Scan(&sh.Shard, &sh.Owner, &sh.Epoch, &sh.ExpiresAtMs, &sh.FloorMs)
		return sh, err
	})
	if err != nil {
		return store.ClusterView{}, fmt.Errorf("pgstore: cluster view: shards: %w", err)
	}
	below, atMs, err := c.rowsBelowFloor(ctx, tx, v.NowMs)
	if err != nil {
		return store.ClusterView{}, fmt.Errorf("pgstore: cluster view: rows below the floors: %w", err)
	}
	v.RowsBelowFloorAtMs = atMs
	for i := range v.Shards {
		v.Shards[i].RowsBelowFloor = below[v.Shards[i].Shard]
	}
	return v, nil
}
