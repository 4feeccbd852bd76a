package pgcluster

import (
	"context"
	"fmt"
	"time"
)

// The cluster's board of host pauses (migration 3): freshq_host_pause, one row per host a
// refusal paused on any node, read by every node at each tick (hosts.Farm's PauseBoard). Times
// cross the wire as ms on the database's clock.

// PublishPauses records that each of hosts is paused until untilMs[i] (the database's clock,
// ms), answered with status[i]; a host paused later already keeps its pause. Rows whose pause
// ended a minute ago are deleted in the same transaction, so the board holds only the pauses
// of the last minute.
func (c *Cluster) PublishPauses(ctx context.Context, hosts []string, untilMs []int64, status []int32) error {
	if len(hosts) == 0 {
		return nil
	}
	batch := `INSERT INTO freshq_host_pause AS p (host, paused_until, status)
		SELECT h, to_timestamp(u / 1000.0), st FROM unnest($1::text[], $2::bigint[], $3::int[]) AS x(h, u, st)
		ORDER BY h
		ON CONFLICT (host) DO UPDATE SET paused_until = EXCLUDED.paused_until, status = EXCLUDED.status
		WHERE p.paused_until < EXCLUDED.paused_until`
	if _, err := c.pool.Exec(ctx, batch, hosts, untilMs, status); err != nil {
		return fmt.Errorf("pgstore: publish host pauses: %w", err)
	}
	if _, err := c.pool.Exec(ctx, `DELETE FROM freshq_host_pause WHERE paused_until < clock_timestamp() - interval '1 minute'`); err != nil {
		return fmt.Errorf("pgstore: delete ended host pauses: %w", err)
	}
	return nil
}

// ReadPauses returns every pause that has not ended, with the database's clock now (ms).
func (c *Cluster) ReadPauses(ctx context.Context) (hosts []string, untilMs []int64, status []int32, nowMs int64, err error) {
	rows, err := c.pool.Query(ctx, `SELECT host, paused_until, status, clock_timestamp() FROM freshq_host_pause
		WHERE paused_until > clock_timestamp() ORDER BY host`)
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("pgstore: read host pauses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h string
		var until, now time.Time
		var st int32
		if err := rows.Scan(&h, &until, &st, &now); err != nil {
			return nil, nil, nil, 0, fmt.Errorf("pgstore: read host pauses: %w", err)
		}
		hosts, untilMs, status, nowMs = append(hosts, h), append(untilMs, until.UnixMilli()), append(status, st), now.UnixMilli()
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, 0, fmt.Errorf("pgstore: read host pauses: %w", err)
	}
	return hosts, untilMs, status, nowMs, nil
}
