package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freshq/freshq/store"
)

// The class index on PostgreSQL (migrations/0006_class_index.sql). A store opened with
// Options.Classifier files every schedule row with its sweep class, in the row's class column,
// and a pass is a store.ClassPass over the index freshq_schedule_class (class, due_at_ms,
// cache_key): a sweep reads each class in due order only as far as it could publish.
//
// Nodes of one cluster may run with different configurations for a while (a rolling change of
// routes), and a row's class depends on the configuration. So the column holds the class
// together with the epoch of the classifier that computed it, epoch << 32 | class, and
// freshq_meta keeps the current epoch and its classifier's fingerprint. Open takes the epoch of
// its classifier: the current one if the fingerprints match, else the next (so an epoch always
// names one fingerprint, and every row of an epoch was classed by a classifier of that
// fingerprint). The invariants:
//
//	C1  every row whose class column lies in epoch E's range carries the class that E's
//	    classifier gives its key and projection: the funnel writes the column with the row,
//	    and the reclassifier changes it only if the row is still as it read it;
//	C2  a pass reads by class only if its snapshot holds no row outside its epoch's range;
//	    otherwise it offers no class index (ClassFingerprint's ok is false) and the sweep
//	    reads the whole due set, as it does on a store without one.
//
// Together they make a class pass read exactly the due rows of its snapshot, each under its
// own classifier's class, as the Badger store's does. Rows of other epochs (written before the
// column existed, or by a node of another configuration) are moved to the current epoch by
// the reclassifier, a background loop of the node whose epoch is current (Reclassify); until
// then the sweep degrades to the full pass, never stalls.

// reclassifyBatch is how many rows one reclassifier statement reads and moves.
const reclassifyBatch = 2000

// reclassifyEvery is how often the reclassifier looks for rows of other epochs once it has
// moved every one it found: a node of another configuration may still be writing them.
const reclassifyEvery = time.Minute

// classRangeOf is the range of the class column that holds epoch's rows: [lo, hi).
func classRangeOf(epoch int64) (lo, hi int64) { return epoch << 32, (epoch + 1) << 32 }

// claimClassEpoch returns the class epoch of a classifier of fingerprint fp: the current one if
// its fingerprint is fp, else a new one, recorded with fp.
func claimClassEpoch(ctx context.Context, pool *pgxpool.Pool, fp uint64) (int64, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgstore: class epoch: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var epoch, have int64
	if err := tx.QueryRow(ctx, `SELECT
		(SELECT value FROM freshq_meta WHERE name = 'class_epoch' FOR UPDATE),
		(SELECT value FROM freshq_meta WHERE name = 'class_fingerprint' FOR UPDATE)`).Scan(&epoch, &have); err != nil {
		return 0, fmt.Errorf("pgstore: class epoch: %w", err)
	}
	if epoch > 0 && uint64(have) == fp {
		return epoch, tx.Commit(ctx)
	}
	if epoch >= math.MaxInt32 {
		return 0, fmt.Errorf("pgstore: class epoch %d: out of epochs", epoch)
	}
	epoch++
	if _, err := tx.Exec(ctx, `UPDATE freshq_meta SET value = CASE name WHEN 'class_epoch' THEN $1::bigint ELSE $2::bigint END
		WHERE name IN ('class_epoch', 'class_fingerprint')`, epoch, int64(fp)); err != nil {
		return 0, fmt.Errorf("pgstore: class epoch: %w", err)
	}
	return epoch, tx.Commit(ctx)
}

// classValue is the class column of a row the node files (C1): 0 without a classifier.
func (s *Store) classValue(cacheKey []byte, p store.Projection) int64 {
	if s.classEpoch == 0 {
		return 0
	}
	return s.classEpoch<<32 | int64(s.opts.Classifier.Class(cacheKey, p))
}

var _ store.ClassPass = (*pass)(nil)

// ClassFingerprint implements store.ClassPass: ok only on a store opened with a classifier
// whose snapshot holds no row of another epoch (C2): the two ends of the class index, read once
// per pass.
func (p *pass) ClassFingerprint() (uint64, bool) {
	if p.s.classEpoch == 0 || p.isClosed() {
		return 0, false
	}
	if !p.classChecked {
		p.classChecked = true
		lo, hi := classRangeOf(p.s.classEpoch)
		var other bool
		// A row below the epoch's range and one above it, each read backwards from where it
		// would be: the first entries of a class are the dead ones of its rows rescheduled
		// since the last vacuum, and its last are the live ones most recently written. (EXISTS
		// over class < $1 is planned generically as a sequential scan once the statement is
		// cached, and reads the whole table to find nothing.)
		err := p.tx.QueryRow(context.Background(), `SELECT (SELECT class FROM freshq_schedule WHERE class < $1 ORDER BY class DESC LIMIT 1) IS NOT NULL
			OR coalesce((SELECT class FROM freshq_schedule ORDER BY class DESC LIMIT 1) >= $2, false)`, lo, hi).Scan(&other)
		if err != nil {
			p.s.log.Warn().Err(err).Msg("class index check failed: the sweep reads the whole due set")
		}
		p.classUsable = err == nil && !other
	}
	if !p.classUsable {
		return 0, false
	}
	return p.s.opts.Classifier.Fingerprint(), true
}

// ReadHead implements store.ClassPass: each shard's first due row at or above its floor, one
// probe of the due index per shard, and the earliest of them; then the next due time past now.
// It is the pass's iteration: a row due at all makes HasFirstDue, none makes the pass complete.
func (p *pass) ReadHead() (store.DueRow, bool, error) {
	switch {
	case p.isClosed():
		return store.DueRow{}, false, store.ErrClosed
	case p.iterated:
		return store.DueRow{}, false, store.ErrPassIterated
	}
	p.iterated = true
	ctx := context.Background()
	args := []any{p.stats.NowMs}
	from, args := p.set.from(args)
	held, args := p.set.held(args)
	rows, err := p.tx.Query(ctx, `SELECT x.* FROM `+from+` JOIN freshq_floor f ON f.shard = o.shard CROSS JOIN LATERAL
		(SELECT `+dueColumns+` FROM freshq_schedule s WHERE s.shard = o.shard AND s.due_at_ms >= f.floor_ms AND s.due_at_ms <= $1
		 ORDER BY s.due_at_ms, s.cache_key LIMIT 1) x
		WHERE `+held+` ORDER BY x.due_at_ms, x.cache_key LIMIT 1`, args...)
	if err != nil {
		return store.DueRow{}, false, fmt.Errorf("pgstore: read head: %w", err)
	}
	var first store.DueRow
	ok := false
	for rows.Next() {
		key, row, err := decodeDue(rows.RawValues())
		if err != nil {
			rows.Close()
			return store.DueRow{}, false, fmt.Errorf("pgstore: read head: %w", err)
		}
		first, ok = store.DueRow{Key: append([]byte(nil), key...), Row: row}, true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return store.DueRow{}, false, fmt.Errorf("pgstore: read head: %w", err)
	}
	if ok {
		p.stats.Rows, p.stats.FirstDueMs, p.stats.HasFirstDue = 1, first.DueAtMs, true
	} else {
		p.stats.Complete = true
	}
	next, has, err := nextDue(ctx, p.tx, p.set, p.stats.NowMs)
	if err != nil {
		return first, false, err
	}
	p.stats.NextDueMs, p.stats.HasNextDue = next, has
	return first, ok, nil
}

// classShards is the condition a class read puts on s.shard, with its arguments appended: none
// outside a cluster; in one, the shards the pass's snapshot shows the node holding at the
// epochs it believes, read once per pass.
func (p *pass) classShards(args []any) (string, []any, error) {
	if p.set.node == "" {
		return "", args, nil
	}
	if p.heldShards == nil {
		from, a := p.set.from(nil)
		held, a := p.set.held(a)
		p.heldShards = []int32{}
		if err := p.tx.QueryRow(context.Background(), `SELECT coalesce(array_agg(o.shard), '{}') FROM `+from+` WHERE `+held, a...).
			Scan(&p.heldShards); err != nil {
			p.heldShards = nil
			return "", args, fmt.Errorf("pgstore: held shards: %w", err)
		}
	}
	return fmt.Sprintf(` AND s.shard = ANY($%d::int[])`, len(args)+1), append(args, p.heldShards), nil
}

func (p *pass) classReadable(what string) error {
	switch {
	case p.isClosed():
		return store.ErrClosed
	case p.s.classEpoch == 0:
		return fmt.Errorf("%w: %s: the store keeps no class index", store.ErrInvalidArgument, what)
	}
	return nil
}

// ClassHeads implements store.ClassPass: a skip scan over the epoch's classes (one index probe
// per class), each class's first due row at or above the pass's floor (the lowest of its
// shards' floors: by F1 no row lies below its own shard's).
//
// The skip scan runs from the highest class down. Each probe lands at an end of a class, and a
// class's first entries are the dead ones of its rows rescheduled since the last vacuum: an
// ascending probe would step through all of them, class by class. Its last entries are the
// rows most recently rescheduled, mostly live.
func (p *pass) ClassHeads() ([]store.ClassHead, error) {
	if err := p.classReadable("class heads"); err != nil {
		return nil, err
	}
	lo, hi := classRangeOf(p.s.classEpoch)
	cond, args, err := p.classShards([]any{lo, hi, p.stats.FloorMs, p.stats.NowMs})
	if err != nil {
		return nil, err
	}
	rows, err := p.tx.Query(context.Background(), `WITH RECURSIVE c(class) AS (
			(SELECT s.class FROM freshq_schedule s WHERE s.class >= $1 AND s.class < $2 ORDER BY s.class DESC LIMIT 1)
			UNION ALL
			SELECT (SELECT s.class FROM freshq_schedule s WHERE s.class < c.class AND s.class >= $1 ORDER BY s.class DESC LIMIT 1)
			FROM c WHERE c.class IS NOT NULL)
		SELECT x.* FROM c CROSS JOIN LATERAL
			(SELECT `+dueColumns+`, s.class FROM freshq_schedule s
			 WHERE s.class = c.class AND s.due_at_ms >= $3 AND s.due_at_ms <= $4`+cond+`
			 ORDER BY s.due_at_ms, s.cache_key LIMIT 1) x
		WHERE c.class IS NOT NULL ORDER BY x.class`, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: class heads: %w", err)
	}
	defer rows.Close()
	var heads []store.ClassHead
	for rows.Next() {
		r, class, err := p.decodeClassRow(rows.RawValues())
		if err != nil {
			return heads, fmt.Errorf("pgstore: class heads: %w", err)
		}
		heads = append(heads, store.ClassHead{Class: class, DueRow: r})
	}
	if err := rows.Err(); err != nil {
		return heads, fmt.Errorf("pgstore: class heads: %w", err)
	}
	return heads, nil
}

// ReadClass implements store.ClassPass.
func (p *pass) ReadClass(class uint32, afterMs int64, afterKey []byte, n int, dst []store.DueRow) ([]store.DueRow, bool, error) {
	if err := p.classReadable("read class"); err != nil {
		return dst, false, err
	}
	if n <= 0 {
		return dst, false, fmt.Errorf("%w: n %d", store.ErrInvalidArgument, n)
	}
	cond, args, err := p.classShards([]any{p.s.classEpoch<<32 | int64(class), afterMs, afterKey, p.stats.NowMs, n + 1})
	if err != nil {
		return dst, false, err
	}
	rows, err := p.tx.Query(context.Background(), `SELECT `+dueColumns+`, s.class FROM freshq_schedule s
		WHERE s.class = $1 AND (s.due_at_ms, s.cache_key) > ($2, $3::bytea) AND s.due_at_ms <= $4`+cond+`
		ORDER BY s.due_at_ms, s.cache_key LIMIT $5`, args...)
	if err != nil {
		return dst, false, fmt.Errorf("pgstore: read class %d: %w", class, err)
	}
	defer rows.Close()
	read := 0
	for rows.Next() {
		if read == n {
			return dst, true, nil
		}
		r, _, err := p.decodeClassRow(rows.RawValues())
		if err != nil {
			return dst, false, fmt.Errorf("pgstore: read class %d: %w", class, err)
		}
		dst = append(dst, r)
		read++
	}
	if err := rows.Err(); err != nil {
		return dst, false, fmt.Errorf("pgstore: read class %d: %w", class, err)
	}
	return dst, false, nil
}

// decodeClassRow decodes dueColumns and the class column; the key is the caller's.
func (p *pass) decodeClassRow(vals [][]byte) (store.DueRow, uint32, error) {
	if len(vals) != 7 || len(vals[6]) != 8 {
		return store.DueRow{}, 0, fmt.Errorf("%w: unexpected class row shape", store.ErrCorruption)
	}
	key, row, err := decodeDue(vals[:6])
	if err != nil {
		return store.DueRow{}, 0, err
	}
	c := int64(binary.BigEndian.Uint64(vals[6]))
	if c>>32 != p.s.classEpoch {
		return store.DueRow{}, 0, fmt.Errorf("%w: row %q of class epoch %d in a pass of epoch %d", store.ErrCorruption, key, c>>32, p.s.classEpoch)
	}
	return store.DueRow{Key: append([]byte(nil), key...), Row: row}, uint32(c), nil
}

// Reclassify moves every row of another class epoch than the node's into it (C1), in batches,
// and returns how many it moved. It moves nothing on a store without a classifier, or once
// another node has taken a newer epoch (that node's reclassifier does the work). A row is
// moved only if it is still as it was read, under a lock taken without waiting (SKIP LOCKED),
// so the funnel's writes are never blocked for long and never deadlock with it; a row skipped
// is found again by the next round.
func (s *Store) Reclassify(ctx context.Context) (moved int, err error) {
	if s.classEpoch == 0 {
		return 0, nil
	}
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	var current int64
	if err := s.pool.QueryRow(ctx, `SELECT value FROM freshq_meta WHERE name = 'class_epoch'`).Scan(&current); err != nil {
		return 0, fmt.Errorf("pgstore: reclassify: %w", err)
	}
	if current != s.classEpoch {
		return 0, nil
	}
	lo, hi := classRangeOf(s.classEpoch)
	// Below the epoch's range, then above it, each walked once in index order from where the
	// last batch stopped: rows moved leave dead index entries behind them, not ahead.
	for _, side := range []struct{ from, to int64 }{{math.MinInt64, lo}, {hi, math.MaxInt64}} {
		afterClass, afterDue, afterKey := side.from, int64(math.MinInt64), []byte{}
		for {
			n, last, err := s.reclassifyBatch(ctx, side.to, afterClass, afterDue, afterKey)
			moved += n
			if err != nil {
				return moved, err
			}
			if last == nil {
				break
			}
			afterClass, afterDue, afterKey = last.class, last.due, last.key
		}
	}
	if moved == 0 {
		return 0, nil
	}
	// The rows moved leave their old entries below or above the epoch's range, and every
	// pass's check for rows of other epochs (ClassFingerprint) would walk them until the
	// table's next vacuum: after a move of a large share of the table, vacuum it now. A
	// small one (what a node of the old configuration writes during a rolling change, moved
	// every round) is left to autovacuum: a vacuum of the whole table every minute would cost
	// more than the few dead entries it clears.
	var tableRows float64
	if err := s.pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'freshq_schedule'::regclass`).Scan(&tableRows); err != nil {
		return moved, fmt.Errorf("pgstore: reclassify: table size: %w", err)
	}
	vacuumed := vacuumAfterMoving(moved, tableRows)
	if vacuumed {
		if _, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) freshq_schedule`); err != nil {
			return moved, fmt.Errorf("pgstore: reclassify: vacuum: %w", err)
		}
	}
	s.log.Info().Int("moved", moved).Int64("class_epoch", s.classEpoch).Bool("vacuumed", vacuumed).Msg("rows reclassified")
	return moved, nil
}

// vacuumAfterMoving reports whether the reclassifier vacuums the schedule table after moving
// moved rows of a table PostgreSQL estimates at tableRows (negative: never analyzed): when it
// moved a full batch or more and an eighth of the table or more, or the table's size is not
// known yet (the first round after an upgrade moves every row).
func vacuumAfterMoving(moved int, tableRows float64) bool {
	if moved < reclassifyBatch {
		return false
	}
	return tableRows <= 0 || float64(moved) >= tableRows/8
}

type classPos struct {
	class, due int64
	key        []byte
}

// reclassifyBatch reads up to reclassifyBatch rows of class below before, strictly after the
// position given, classes them and moves those still unchanged. last is where it stopped; nil
// when it read fewer than a batch.
func (s *Store) reclassifyBatch(ctx context.Context, before, afterClass, afterDue int64, afterKey []byte) (int, *classPos, error) {
	rows, err := s.pool.Query(ctx, `SELECT s.cache_key, s.class, s.due_at_ms, s.flags, s.effective_interval_ms,
		s.stored_interval_ms, s.rank_interval_ms FROM freshq_schedule s
		WHERE (s.class, s.due_at_ms, s.cache_key) > ($1, $2, $3::bytea) AND s.class < $4
		ORDER BY s.class, s.due_at_ms, s.cache_key LIMIT $5`, afterClass, afterDue, afterKey, before, reclassifyBatch)
	if err != nil {
		return 0, nil, fmt.Errorf("pgstore: reclassify: %w", err)
	}
	var (
		keys                                   [][]byte
		olds, news, dues, effs, storeds, ranks []int64
		flags                                  []int16
		last                                   classPos
		read                                   int
	)
	for rows.Next() {
		var key []byte
		var old int64
		var c rowCols
		if err := rows.Scan(&key, &old, &c.due, &c.flags, &c.eff, &c.stored, &c.rank); err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("pgstore: reclassify: %w", err)
		}
		read++
		last = classPos{class: old, due: c.due, key: key}
		r, err := c.row()
		if err != nil { // VerifyIndex reports it; its class stays as it is
			continue
		}
		keys, olds, news = append(keys, key), append(olds, old), append(news, s.classValue(key, r.Projection))
		dues, flags, effs, storeds, ranks = append(dues, c.due), append(flags, c.flags), append(effs, c.eff), append(storeds, c.stored), append(ranks, c.rank)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("pgstore: reclassify: %w", err)
	}
	if len(keys) == 0 {
		return 0, nextPos(read, last), nil
	}
	if s.testBeforeReclassifyUpdate != nil {
		s.testBeforeReclassifyUpdate()
	}
	tag, err := s.pool.Exec(ctx, `WITH v AS (
			SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::bigint[], $5::smallint[], $6::bigint[], $7::bigint[], $8::bigint[])
				AS v(cache_key, old_class, new_class, due, flags, eff, stored, rank)),
		l AS (
			SELECT s.cache_key, v.new_class FROM freshq_schedule s JOIN v ON s.cache_key = v.cache_key
			WHERE s.class = v.old_class AND s.due_at_ms = v.due AND s.flags = v.flags AND s.effective_interval_ms = v.eff
				AND s.stored_interval_ms = v.stored AND s.rank_interval_ms = v.rank
			FOR UPDATE OF s SKIP LOCKED)
		UPDATE freshq_schedule s SET class = l.new_class FROM l WHERE s.cache_key = l.cache_key`,
		keys, olds, news, dues, flags, effs, storeds, ranks)
	if err != nil {
		return 0, nil, fmt.Errorf("pgstore: reclassify: %w", err)
	}
	return int(tag.RowsAffected()), nextPos(read, last), nil
}

// nextPos is where the next batch starts: nil when this one read fewer rows than a batch.
func nextPos(read int, last classPos) *classPos {
	if read < reclassifyBatch {
		return nil
	}
	return &last
}

// reclassifyLoop runs Reclassify at Open and then every reclassifyEvery until ctx ends. A
// failure is logged; the next round tries again.
func (s *Store) reclassifyLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(reclassifyEvery)
	defer t.Stop()
	for {
		if _, err := s.Reclassify(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, store.ErrClosed) {
			s.log.Warn().Err(err).Msg("reclassify failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
