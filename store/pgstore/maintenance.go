package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/freshq/freshq/store"
)

// reconcileBatch is how many restored rows one funnel call files.
const reconcileBatch = 1024

// Reconcile implements store.Store: every target without a schedule row gets one, due at
// nowMs, filed only if the key still has no row when the funnel applies it.
func (s *Store) Reconcile(nowMs int64) (restored int, err error) {
	if nowMs < 0 {
		return 0, fmt.Errorf("%w: negative now %d", store.ErrInvalidArgument, nowMs)
	}
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	start := time.Now()
	var missing, corrupt int
	defer func() {
		ev := s.log.Info()
		if err != nil {
			ev = s.log.Error().Err(err)
		}
		ev.Int("missing", missing).Int("restored", restored).Int("corrupt", corrupt).
			Dur("took", time.Since(start)).Msg("reconcile")
	}()
	ctx := context.Background()
	rows, err := s.pool.Query(ctx, `SELECT t.cache_key, t.value FROM freshq_target t
		WHERE NOT EXISTS (SELECT 1 FROM freshq_schedule s WHERE s.cache_key = t.cache_key) ORDER BY t.cache_key`)
	if err != nil {
		return 0, fmt.Errorf("pgstore: reconcile: %w", err)
	}
	var pending []store.Write
	for rows.Next() {
		var key, v []byte
		if err := rows.Scan(&key, &v); err != nil {
			rows.Close()
			return 0, fmt.Errorf("pgstore: reconcile: %w", err)
		}
		missing++
		var t store.Target
		if err := t.UnmarshalBinary(v); err != nil {
			corrupt++
			continue
		}
		sch, err := store.NewSchedule(key, nowMs, t.Source.Submitted(), t.StoredIntervalMs, store.Lanes{
			NeverRendered: t.LastRender.Status == 0,
			Failing:       t.Failures.Count > 0,
		})
		if err != nil {
			corrupt++
			continue
		}
		pending = append(pending, store.Write{Schedule: sch, Target: &t})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("pgstore: reconcile: %w", err)
	}
	for len(pending) > 0 {
		n := min(len(pending), reconcileBatch)
		got, err := s.refileIfAbsent(pending[:n])
		restored += got
		if err != nil {
			return restored, err
		}
		pending = pending[n:]
	}
	return restored, nil
}

// VerifyIndex implements store.Store. PostgreSQL keeps the due index itself; what can go wrong
// here is a row filed under the wrong shard (its owner would never sweep it), or a projection
// that does not decode. A row under the wrong shard counts as a row without its entry. On a
// store with a classifier, a row of the node's class epoch is a class entry, and one whose
// class is not the classifier's (C1, classindex.go) counts as a row without its class entry and
// an entry without its row; rows of other epochs are not in this node's class index.
func (s *Store) VerifyIndex() (store.IndexReport, error) {
	var rep store.IndexReport
	if s.closed.Load() {
		return rep, store.ErrClosed
	}
	rows, err := s.pool.Query(context.Background(), `SELECT s.cache_key, s.shard, s.due_at_ms, s.flags,
		s.effective_interval_ms, s.stored_interval_ms, s.rank_interval_ms, s.class FROM freshq_schedule s`)
	if err != nil {
		return rep, fmt.Errorf("pgstore: verify: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key []byte
		var shard int32
		var c rowCols
		var class int64
		if err := rows.Scan(&key, &shard, &c.due, &c.flags, &c.eff, &c.stored, &c.rank, &class); err != nil {
			return rep, fmt.Errorf("pgstore: verify: %w", err)
		}
		rep.Rows++
		rep.Entries++
		bad := false
		r, err := c.row()
		if err != nil {
			rep.Corrupt++
			bad = true
		} else if shard != Shard(key, s.shards) {
			rep.RowsWithoutEntry++
			bad = true
		}
		if s.classEpoch != 0 && class>>32 == s.classEpoch {
			rep.ClassEntries++
			if err == nil && class != s.classValue(key, r.Projection) {
				rep.RowsWithoutClassEntry++
				rep.ClassEntriesWithoutRow++
				bad = true
			}
		}
		if bad && len(rep.Examples) < 8 {
			rep.Examples = append(rep.Examples, string(key))
		}
	}
	return rep, rows.Err()
}
