package pgstore

import (
	"context"
	"fmt"
)

// RowsBelowFloor implements store.Store: rows due below their own shard's floor, found through
// the due index shard by shard, counted up to limit, in the shards the node works on (every
// shard outside a cluster, its own in one).
func (s *Store) RowsBelowFloor(limit int) (int, error) {
	if s.closed.Load() {
		return 0, nil
	}
	var n int
	from, args := s.ownedSet().from([]any{limit})
	err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT 1 FROM `+from+`
		JOIN freshq_floor f ON f.shard = o.shard
		CROSS JOIN LATERAL (SELECT 1 FROM freshq_schedule s WHERE s.shard = f.shard AND s.due_at_ms < f.floor_ms LIMIT $1) x
		LIMIT $1) c`, args...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pgstore: rows below the floor: %w", err)
	}
	return n, nil
}
