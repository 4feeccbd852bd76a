package pgstore

import (
	"context"
	"fmt"

	"github.com/freshq/freshq/store"
)

// ownedRowsSQL is one shard's schedule rows, each with its target's value (NULL without one):
// an index scan of the due index's shard prefix joined to the targets' primary key, in one
// statement.
const ownedRowsSQL = `SELECT s.cache_key, s.due_at_ms, s.flags, s.effective_interval_ms, s.stored_interval_ms, s.rank_interval_ms, t.value
	FROM freshq_schedule s LEFT JOIN freshq_target t ON t.cache_key = s.cache_key
	WHERE s.shard = $1`

// ForEachOwnedRow calls fn with every schedule row of the shards the node holds (every shard
// outside a cluster) and the row's target, nil when it has none, and returns those shards: the
// capacity recount's read (capacity.ShardedSource). It reads a shard in one statement, rows and
// targets together, from that statement's snapshot; so over a cluster whose nodes each recount
// their own shards, every shard is read once, and never a statement per row. A shard given up
// while it is read is still read to its end (its rows are then dropped by the reader, which
// counts only the shards held). It stops at ctx's end or fn's first error.
func (s *Store) ForEachOwnedRow(ctx context.Context, fn func(key []byte, row store.Row, tgt *store.Target) error) ([]int32, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	ss := s.ownedSet()
	for _, sh := range ss.shards {
		if err := s.forEachRowOf(ctx, sh, fn); err != nil {
			return nil, err
		}
	}
	return ss.shards, nil
}

func (s *Store) forEachRowOf(ctx context.Context, shard int32, fn func(key []byte, row store.Row, tgt *store.Target) error) error {
	rows, err := s.pool.Query(ctx, ownedRowsSQL, shard)
	if err != nil {
		return fmt.Errorf("pgstore: rows of shard %d: %w", shard, err)
	}
	defer rows.Close()
	var key, value []byte
	var r rowCols
	for rows.Next() {
		if err := rows.Scan(&key, &r.due, &r.flags, &r.eff, &r.stored, &r.rank, &value); err != nil {
			return fmt.Errorf("pgstore: rows of shard %d: %w", shard, err)
		}
		row, err := r.row()
		if err != nil {
			return fmt.Errorf("pgstore: schedule row %q: %w", key, err)
		}
		var tgt *store.Target
		if value != nil {
			tgt = new(store.Target)
			if err := tgt.UnmarshalBinary(value); err != nil {
				return fmt.Errorf("pgstore: target %q: %w", key, err)
			}
		}
		if err := fn(key, row, tgt); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: rows of shard %d: %w", shard, err)
	}
	return nil
}
