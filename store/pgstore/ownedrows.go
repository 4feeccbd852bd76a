package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/freshq/freshq/store"
)

// ownedRowsSQL is the schedule rows of a set of shards, each with its target's value (NULL
// without one), in one statement. Over most of the store the planner joins the two tables by
// hashing one sequential scan into the other; a statement per shard was an index probe of the
// targets per row instead, about six times as long at a million rows (BenchmarkRecountRead),
// and minutes of the database's time a recount in a benchmark of the queue. It is planned for
// the shards it is given (ownedRowsMode): a plan cached for any shard set would be the probe
// plan again.
const ownedRowsSQL = `SELECT s.cache_key, s.due_at_ms, s.flags, s.effective_interval_ms, s.stored_interval_ms, s.rank_interval_ms, t.value
	FROM freshq_schedule s LEFT JOIN freshq_target t ON t.cache_key = s.cache_key
	WHERE s.shard = ANY($1::int[])`

// ownedRowsMode sends ownedRowsSQL as an unnamed statement (its description cached, its rows in
// binary), which PostgreSQL plans with the values bound: whether a hash join or index probes is
// cheaper depends on how many rows the shards hold.
const ownedRowsMode = pgx.QueryExecModeCacheDescribe

// ForEachOwnedRow calls fn with every schedule row of the shards the node holds (every shard
// outside a cluster) and the row's target, nil when it has none, and returns those shards: the
// capacity recount's read (capacity.ShardedSource). It reads them in one statement, rows and
// targets together, from that statement's snapshot; so over a cluster whose nodes each recount
// their own shards, every shard is read once, and never a statement per row. A shard given up
// while it is read is still read to the end (its rows are then dropped by the reader, which
// counts only the shards held). It stops at ctx's end or fn's first error.
func (s *Store) ForEachOwnedRow(ctx context.Context, fn func(key []byte, row store.Row, tgt *store.Target) error) ([]int32, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	ss := s.ownedSet()
	if len(ss.shards) == 0 {
		return ss.shards, nil
	}
	if err := s.forEachRowOf(ctx, ss.shards, fn); err != nil {
		return nil, err
	}
	return ss.shards, nil
}

func (s *Store) forEachRowOf(ctx context.Context, shards []int32, fn func(key []byte, row store.Row, tgt *store.Target) error) error {
	rows, err := s.pool.Query(ctx, ownedRowsSQL, ownedRowsMode, shards)
	if err != nil {
		return fmt.Errorf("pgstore: rows of %d shards: %w", len(shards), err)
	}
	defer rows.Close()
	var key, value []byte
	var r rowCols
	for rows.Next() {
		if err := rows.Scan(&key, &r.due, &r.flags, &r.eff, &r.stored, &r.rank, &value); err != nil {
			return fmt.Errorf("pgstore: rows of %d shards: %w", len(shards), err)
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
		return fmt.Errorf("pgstore: rows of %d shards: %w", len(shards), err)
	}
	return nil
}
