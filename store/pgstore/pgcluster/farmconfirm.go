package pgcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/freshq/freshq/store"
)

// The nodes' confirmations of the division of the hosts' limits (migration 7,
// freshq_farm_confirm): the ConfirmBoard of package hosts' Farm. Every time is the database's
// clock, so that the nodes agree on how long ago a node was heard from.

// confirmKeep is how long a confirmation of a node never heard from again is kept: far past
// any lease TTL and grace, after which no node reads it for anything.
const confirmKeep = 24 * time.Hour

// PublishConfirm records c.Node's confirmation (c.AtMs is ignored: the database's clock now).
// It also drops the confirmations of nodes not heard from for a day.
func (c *Cluster) PublishConfirm(ctx context.Context, fc store.FarmConfirm) error {
	demand, err := json.Marshal(nonNil(fc.Demand))
	if err != nil {
		return fmt.Errorf("pgstore: publish the farm's confirmation: %w", err)
	}
	prevDemand, err := json.Marshal(nonNil(fc.PrevDemand))
	if err != nil {
		return fmt.Errorf("pgstore: publish the farm's confirmation: %w", err)
	}
	_, err = c.pool.Exec(ctx, `INSERT INTO freshq_farm_confirm (node_id, members, round, basis, demand,
			prev_members, prev_round, prev_basis, prev_demand, in_flight, at)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9::jsonb, $10, clock_timestamp())
		ON CONFLICT (node_id) DO UPDATE SET members = EXCLUDED.members, round = EXCLUDED.round,
			basis = EXCLUDED.basis, demand = EXCLUDED.demand, prev_members = EXCLUDED.prev_members,
			prev_round = EXCLUDED.prev_round, prev_basis = EXCLUDED.prev_basis,
			prev_demand = EXCLUDED.prev_demand, in_flight = EXCLUDED.in_flight, at = EXCLUDED.at`,
		fc.Node, fc.Members, fc.Round, fc.Basis, string(demand), fc.PrevMembers, fc.PrevRound, fc.PrevBasis,
		string(prevDemand), fc.InFlight)
	if err != nil {
		return fmt.Errorf("pgstore: publish the farm's confirmation: %w", err)
	}
	if _, err := c.pool.Exec(ctx, `DELETE FROM freshq_farm_confirm WHERE at < clock_timestamp() - $1::interval`, confirmKeep); err != nil {
		return fmt.Errorf("pgstore: drop old farm confirmations: %w", err)
	}
	return nil
}

func nonNil(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

// ReadConfirms returns every node's last confirmation, in node order, with AtMs the later of
// the confirmation's time and the node's last heartbeat, and the database's clock now.
func (c *Cluster) ReadConfirms(ctx context.Context) (confirms []store.FarmConfirm, nowMs int64, err error) {
	var now time.Time
	if err := c.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return nil, 0, fmt.Errorf("pgstore: read the farm's confirmations: %w", err)
	}
	rows, err := c.pool.Query(ctx, `SELECT c.node_id, c.members, c.round, c.basis, c.demand::text,
			c.prev_members, c.prev_round, c.prev_basis, c.prev_demand::text, c.in_flight,
			greatest(c.at, n.heartbeat_at)
		FROM freshq_farm_confirm c LEFT JOIN freshq_node n ON n.node_id = c.node_id ORDER BY c.node_id`)
	if err != nil {
		return nil, 0, fmt.Errorf("pgstore: read the farm's confirmations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var fc store.FarmConfirm
		var demand, prevDemand string
		var at time.Time
		if err := rows.Scan(&fc.Node, &fc.Members, &fc.Round, &fc.Basis, &demand, &fc.PrevMembers, &fc.PrevRound,
			&fc.PrevBasis, &prevDemand, &fc.InFlight, &at); err != nil {
			return nil, 0, fmt.Errorf("pgstore: read the farm's confirmations: %w", err)
		}
		if err := json.Unmarshal([]byte(demand), &fc.Demand); err != nil {
			return nil, 0, fmt.Errorf("pgstore: read the farm's confirmations: %s's demand: %w", fc.Node, err)
		}
		if err := json.Unmarshal([]byte(prevDemand), &fc.PrevDemand); err != nil {
			return nil, 0, fmt.Errorf("pgstore: read the farm's confirmations: %s's demand before: %w", fc.Node, err)
		}
		fc.AtMs = at.UnixMilli()
		confirms = append(confirms, fc)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("pgstore: read the farm's confirmations: %w", err)
	}
	return confirms, now.UnixMilli(), nil
}
