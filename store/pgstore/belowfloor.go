package pgstore

import (
	"context"
	"fmt"
)

// RowsBelowFloor implements store.Store: rows due below their own shard's floor, found through
// the due index shard by shard, counted up to limit.
func (s *Store) RowsBelowFloor(limit int) (int, error) {
	if s.closed.Load() {
		return 0, nil
	}
	var n int
	err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT 1 FROM freshq_floor f
		CROSS JOIN LATERAL (SELECT 1 FROM freshq_schedule s WHERE s.shard = f.shard AND s.due_at_ms < f.floor_ms LIMIT $1) x
		LIMIT $1) c`, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pgstore: rows below the floor: %w", err)
	}
	return n, nil
}
