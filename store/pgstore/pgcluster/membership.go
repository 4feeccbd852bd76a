package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/freshq/freshq/store"
)

// The cluster's records (migration 2): freshq_node and freshq_shard_lease. These methods are
// the Registry of a node (package cluster); every time is the database's clock
// (clock_timestamp()), so that nodes whose clocks disagree still agree on which lease has
// expired. Lease rows are always locked in shard order, as the store's funnel and advance lock
// them (FOR SHARE), so that no two of these statements deadlock.

// Register records node id as live under incarnation; a new incarnation's capacity figures
// are unknown until its first HeartbeatFigures (the last run's are not its). It refuses (store.ErrIdentityInUse)
// when another incarnation heartbeat within ttl and is not stopping: two processes under one
// identity would each believe they hold its shards.
func (c *Cluster) Register(ctx context.Context, id, addr, incarnation string, ttl time.Duration) error {
	tag, err := c.pool.Exec(ctx, `INSERT INTO freshq_node AS n (node_id, addr, incarnation, started_at, heartbeat_at)
		VALUES ($1, $2, $3, clock_timestamp(), clock_timestamp())
		ON CONFLICT (node_id) DO UPDATE SET addr = EXCLUDED.addr, incarnation = EXCLUDED.incarnation,
			started_at = CASE WHEN n.incarnation = EXCLUDED.incarnation THEN n.started_at ELSE EXCLUDED.started_at END,
			capacity = CASE WHEN n.incarnation = EXCLUDED.incarnation THEN n.capacity ELSE NULL END,
			heartbeat_at = EXCLUDED.heartbeat_at, stopping = false
		WHERE n.incarnation = EXCLUDED.incarnation OR n.stopping OR n.heartbeat_at <= clock_timestamp() - $4::interval`,
		id, addr, incarnation, ttl)
	if err != nil {
		return fmt.Errorf("pgstore: register node %q: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %q", store.ErrIdentityInUse, id)
	}
	return nil
}

// Heartbeat renews node id's heartbeat, if the identity is still this incarnation's.
func (c *Cluster) Heartbeat(ctx context.Context, id, incarnation string) error {
	tag, err := c.pool.Exec(ctx, `UPDATE freshq_node SET heartbeat_at = clock_timestamp()
		WHERE node_id = $1 AND incarnation = $2 AND NOT stopping`, id, incarnation)
	if err != nil {
		return fmt.Errorf("pgstore: heartbeat: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %q", store.ErrIdentityInUse, id)
	}
	return nil
}

// HeartbeatFigures is Heartbeat that also publishes the node's capacity figures (a JSON
// document, the wire's NodeCapacity; the cluster's FigureRegistry) in the same statement, so the
// figures are as fresh as the heartbeat that carries them. figures must be a JSON object: the
// column is jsonb.
func (c *Cluster) HeartbeatFigures(ctx context.Context, id, incarnation string, figures []byte) error {
	tag, err := c.pool.Exec(ctx, `UPDATE freshq_node SET heartbeat_at = clock_timestamp(), capacity = $3::jsonb
		WHERE node_id = $1 AND incarnation = $2 AND NOT stopping`, id, incarnation, string(figures))
	if err != nil {
		return fmt.Errorf("pgstore: heartbeat: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %q", store.ErrIdentityInUse, id)
	}
	return nil
}

// SetStopping marks node id as stopping: no node counts it live any more, so none waits for
// it to hand a shard over, and it takes no new shard.
func (c *Cluster) SetStopping(ctx context.Context, id, incarnation string) error {
	_, err := c.pool.Exec(ctx, `UPDATE freshq_node SET stopping = true WHERE node_id = $1 AND incarnation = $2`, id, incarnation)
	if err != nil {
		return fmt.Errorf("pgstore: stopping: %w", err)
	}
	return nil
}

// Deregister removes node id's record, if it is still this incarnation's.
func (c *Cluster) Deregister(ctx context.Context, id, incarnation string) error {
	_, err := c.pool.Exec(ctx, `DELETE FROM freshq_node WHERE node_id = $1 AND incarnation = $2`, id, incarnation)
	if err != nil {
		return fmt.Errorf("pgstore: deregister: %w", err)
	}
	return nil
}

// ReadView reads the nodes and every shard's lease, with the database's clock, in one snapshot.
func (c *Cluster) ReadView(ctx context.Context) (store.Membership, error) {
	var v store.Membership
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&v.Now); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT node_id, addr, started_at, heartbeat_at, stopping FROM freshq_node ORDER BY node_id`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var n store.NodeRecord
			if err := rows.Scan(&n.ID, &n.Addr, &n.StartedAt, &n.HeartbeatAt, &n.Stopping); err != nil {
				rows.Close()
				return err
			}
			v.Nodes = append(v.Nodes, n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT shard, coalesce(owner, ''), epoch, expires_at FROM freshq_shard_lease ORDER BY shard`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l store.LeaseRecord
			var exp pgtype.Timestamptz // '-infinity' for a shard never owned
			if err := rows.Scan(&l.Shard, &l.Owner, &l.Epoch, &exp); err != nil {
				return err
			}
			if exp.InfinityModifier == pgtype.Finite {
				l.ExpiresAt = exp.Time
			}
			v.Leases = append(v.Leases, l)
		}
		return rows.Err()
	})
	if err != nil {
		return store.Membership{}, fmt.Errorf("pgstore: read the cluster: %w", err)
	}
	return v, nil
}

// Acquire takes shard for node id if its lease is still at epoch seen and is free, expired,
// or id's own, incrementing the epoch; it reports the new epoch and whether it took the shard.
func (c *Cluster) Acquire(ctx context.Context, id string, shard int32, seen int64, ttl time.Duration) (int64, bool, error) {
	var epoch int64
	err := c.pool.QueryRow(ctx, `UPDATE freshq_shard_lease SET owner = $1, epoch = epoch + 1,
			expires_at = clock_timestamp() + $4::interval
		WHERE shard = $2 AND epoch = $3 AND (owner IS NULL OR owner = $1 OR expires_at <= clock_timestamp())
		RETURNING epoch`, id, shard, seen, ttl).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("pgstore: acquire shard %d: %w", shard, err)
	}
	return epoch, true, nil
}

// Renew extends node id's leases of shards at epochs by ttl, and returns the shards it
// renewed: a lease whose owner or epoch changed is not (the shard was lost). A lease of id's
// that expired but was not taken by another node is renewed: its epoch proves no one did.
func (c *Cluster) Renew(ctx context.Context, id string, shards []int32, epochs []int64, ttl time.Duration) (map[int32]bool, error) {
	rows, err := c.pool.Query(ctx, `UPDATE freshq_shard_lease l SET expires_at = clock_timestamp() + $4::interval
		FROM (SELECT x.shard FROM freshq_shard_lease x
		      JOIN unnest($2::int[], $3::bigint[]) AS o(shard, epoch) ON x.shard = o.shard AND x.epoch = o.epoch
		      WHERE x.owner = $1 ORDER BY x.shard FOR UPDATE OF x) k
		WHERE l.shard = k.shard RETURNING l.shard`, id, shards, epochs, ttl)
	if err != nil {
		return nil, fmt.Errorf("pgstore: renew shard leases: %w", err)
	}
	defer rows.Close()
	renewed := make(map[int32]bool, len(shards))
	for rows.Next() {
		var sh int32
		if err := rows.Scan(&sh); err != nil {
			return nil, fmt.Errorf("pgstore: renew shard leases: %w", err)
		}
		renewed[sh] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: renew shard leases: %w", err)
	}
	return renewed, nil
}

// Release hands node id's leases of shards at epochs over: no owner, expired now, epoch kept.
func (c *Cluster) Release(ctx context.Context, id string, shards []int32, epochs []int64) error {
	_, err := c.pool.Exec(ctx, `UPDATE freshq_shard_lease l SET owner = NULL, expires_at = clock_timestamp()
		FROM (SELECT x.shard FROM freshq_shard_lease x
		      JOIN unnest($2::int[], $3::bigint[]) AS o(shard, epoch) ON x.shard = o.shard AND x.epoch = o.epoch
		      WHERE x.owner = $1 ORDER BY x.shard FOR UPDATE OF x) k
		WHERE l.shard = k.shard`, id, shards, epochs)
	if err != nil {
		return fmt.Errorf("pgstore: release shard leases: %w", err)
	}
	return nil
}
