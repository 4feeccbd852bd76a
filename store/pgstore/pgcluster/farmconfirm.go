package pgcluster

import (
	"context"
	"fmt"
	"time"
)

// The nodes' confirmations of the division of the hosts' limits (migration 7,
// freshq_farm_confirm): the ConfirmBoard of package hosts' Farm. Every time is the database's
// clock, so that the nodes agree on how long ago a node was heard from.

// confirmKeep is how long a confirmation of a node never heard from again is kept: far past
// any lease TTL and grace, after which no node reads it for anything.
const confirmKeep = 24 * time.Hour

// PublishConfirm records node's confirmation: its renders in flight (inFlight) fit its share of
// every host under the division of membership members in round (−1: none yet). It also drops
// the confirmations of nodes not heard from for a day.
func (c *Cluster) PublishConfirm(ctx context.Context, node string, members, round int64, inFlight int) error {
	_, err := c.pool.Exec(ctx, `INSERT INTO freshq_farm_confirm (node_id, members, round, in_flight, at)
		VALUES ($1, $2, $3, $4, clock_timestamp())
		ON CONFLICT (node_id) DO UPDATE SET members = EXCLUDED.members, round = EXCLUDED.round,
			in_flight = EXCLUDED.in_flight, at = EXCLUDED.at`, node, members, round, inFlight)
	if err != nil {
		return fmt.Errorf("pgstore: publish the farm's confirmation: %w", err)
	}
	if _, err := c.pool.Exec(ctx, `DELETE FROM freshq_farm_confirm WHERE at < clock_timestamp() - $1::interval`, confirmKeep); err != nil {
		return fmt.Errorf("pgstore: drop old farm confirmations: %w", err)
	}
	return nil
}

// ReadConfirms returns every node's last confirmation, in node order, with atMs the later of
// the confirmation's time and the node's last heartbeat, and the database's clock now.
func (c *Cluster) ReadConfirms(ctx context.Context) (nodes []string, members, rounds, atMs []int64, nowMs int64, err error) {
	var now time.Time
	if err := c.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return nil, nil, nil, nil, 0, fmt.Errorf("pgstore: read the farm's confirmations: %w", err)
	}
	rows, err := c.pool.Query(ctx, `SELECT c.node_id, c.members, c.round, greatest(c.at, n.heartbeat_at)
		FROM freshq_farm_confirm c LEFT JOIN freshq_node n ON n.node_id = c.node_id ORDER BY c.node_id`)
	if err != nil {
		return nil, nil, nil, nil, 0, fmt.Errorf("pgstore: read the farm's confirmations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var m, r int64
		var at time.Time
		if err := rows.Scan(&id, &m, &r, &at); err != nil {
			return nil, nil, nil, nil, 0, fmt.Errorf("pgstore: read the farm's confirmations: %w", err)
		}
		nodes, members, rounds, atMs = append(nodes, id), append(members, m), append(rounds, r), append(atMs, at.UnixMilli())
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, nil, 0, fmt.Errorf("pgstore: read the farm's confirmations: %w", err)
	}
	return nodes, members, rounds, atMs, now.UnixMilli(), nil
}
