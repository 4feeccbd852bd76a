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
// read of the due index (shard, due_at_ms) that stops there, so that a database where the floor
// protocol broke costs the count at most this many live rows a shard, not the table. The dead
// index entries below the floor it steps over whatever the bound (those of every row rendered
// since the table's last vacuum: 219 ms at 2,000,000 rows), which is why only worker 0's alarm
// takes it (RowsBelowFloor), never a reader of the view.
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
	// Each shard's count is a LIMIT-ed read of the due index, all in one row with the
	// statement's start on the database's clock (its snapshot's).
	belowFloorSQL = `SELECT ` + msOf("now()") + `, coalesce(array_agg(b.shard), '{}'), coalesce(array_agg(b.n), '{}')
		FROM (SELECT f.shard, (SELECT count(*) FROM (SELECT 1 FROM freshq_schedule s
			WHERE s.shard = f.shard AND s.due_at_ms < f.floor_ms LIMIT $1) x) AS n FROM freshq_floor f) b`
)

// belowFloorCount is the last count of the rows below each shard's floor: the shards that had
// any, and when it was taken on the database's clock (0: not yet). A count replaces shards, never
// writes into it, so a view may keep the map it read.
type belowFloorCount struct {
	mu     sync.Mutex // guards the fields; held only to copy them
	atMs   int64
	shards map[int]int
	// counting makes counts one at a time (worker 0's sweeper is their only caller).
	counting sync.Mutex
}

// last is the last count and when it was taken (0: never).
func (b *belowFloorCount) last() (map[int]int, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.shards, b.atMs
}

// RowsBelowFloor counts the rows below the floor of every shard of the cluster, up to
// MaxRowsBelowFloorCounted a shard, keeps the count for ClusterView, and returns the sum over
// the shards the node works on (OwnedShards: every shard outside a cluster), up to limit. It is
// store.Store.RowsBelowFloor for worker 0's alarm (freshq_below_floor), which calls it after a
// sweep at most every 10 s (sweeploop.BelowFloorAlarm): the one count serves the alarm, the
// cluster view and its readers.
func (c *Cluster) RowsBelowFloor(limit int) (int, error) {
	if c.st.Closed() {
		return 0, nil
	}
	b := &c.belowFloor
	b.counting.Lock()
	defer b.counting.Unlock()
	var atMs int64
	var shardIDs []int32
	var counts []int64
	if err := c.pool.QueryRow(context.Background(), belowFloorSQL, MaxRowsBelowFloorCounted).Scan(&atMs, &shardIDs, &counts); err != nil {
		return 0, fmt.Errorf("pgstore: rows below the floors: %w", err)
	}
	shards := map[int]int{}
	for i, sh := range shardIDs {
		if counts[i] > 0 {
			shards[int(sh)] = int(counts[i])
		}
	}
	b.mu.Lock()
	b.atMs, b.shards = atMs, shards
	b.mu.Unlock()
	n := 0
	for _, sh := range c.st.OwnedShards() {
		n += shards[int(sh)]
	}
	return min(n, limit), nil
}

// ClusterView reads the nodes and the shard leases from one snapshot, with the database's
// clock at its start as NowMs, for people and metrics (the cluster's own decisions read
// ReadView). The rows below each shard's floor are worker 0's last count (RowsBelowFloor), taken
// before the snapshot, at RowsBelowFloorAtMs (≤ NowMs; 0 and none while it has not counted yet).
// A node is live while its heartbeat is younger than leaseTTL (cluster.lease_ttl); the cluster
// gives shards only to the live nodes that are not stopping.
//
// A view reads the nodes, the leases and the floors (rows by the node and by the shard), never
// the schedule: a reader of /v1/queue, /v1/cluster or /metrics, at one view a second or a
// hundred, costs the job tables nothing and sets off no count. Views are read one at a time (a
// view waits for the one being read, or for ctx), so that readers at once hold at most one of
// the store's connections, never the queue's.
func (c *Cluster) ClusterView(ctx context.Context, leaseTTL time.Duration) (store.ClusterView, error) {
	if c.st.Closed() {
		return store.ClusterView{}, store.ErrClosed
	}
	select {
	case c.viewSlot <- struct{}{}:
		defer func() { <-c.viewSlot }()
	case <-ctx.Done():
		return store.ClusterView{}, fmt.Errorf("pgstore: cluster view: waiting for the view being read: %w", ctx.Err())
	}
	// Read before the snapshot's clock, so that the count is never later than NowMs.
	below, atMs := c.belowFloor.last()
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
	v.RowsBelowFloorAtMs = atMs
	for i := range v.Shards {
		v.Shards[i].RowsBelowFloor = below[v.Shards[i].Shard]
	}
	return v, nil
}
