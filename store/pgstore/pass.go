package pgstore

import (
	"context"
	"encoding/binary"

	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/freshq/freshq/store"
)

// pass is a sweep pass: a REPEATABLE READ, read-only transaction is its snapshot, and the
// floors it reads in it are where its iteration starts, shard by shard.
type pass struct {
	s        *Store
	tx       pgx.Tx
	set      shardSet // the shards the pass works on, fixed at BeginPass
	stats    store.PassStats
	iterated bool
	advanced bool // AdvanceFloor ran: a pass advances at most once
	closed   bool // guarded by Store.passMu

	// The class index (classindex.go): whether the snapshot holds only the node's epoch's
	// rows, checked once; the shards a class read is limited to in a cluster, read once.
	classChecked, classUsable bool
	heldShards                []int32
}

// BeginPass implements store.Store.
func (s *Store) BeginPass(nowMs int64) (store.Pass, error) {
	if nowMs < 0 {
		return nil, fmt.Errorf("%w: negative now %d", store.ErrInvalidArgument, nowMs)
	}
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	ctx := context.Background()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin pass: %w", err)
	}
	p := &pass{s: s, tx: tx, set: s.ownedSet()}
	p.stats.NowMs = nowMs
	from, args := p.set.from(nil)
	if err := tx.QueryRow(ctx, `SELECT coalesce(min(f.floor_ms), 0) FROM `+from+` JOIN freshq_floor f ON f.shard = o.shard`, args...).Scan(&p.stats.FloorMs); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("pgstore: begin pass: %w", err)
	}
	s.passMu.Lock()
	s.passes[p] = struct{}{}
	s.passMu.Unlock()
	return p, nil
}

func (p *pass) isClosed() bool {
	p.s.passMu.Lock()
	defer p.s.passMu.Unlock()
	return p.closed
}

// dueColumns is what a pass and a scan read of a row: the due index's columns.
const dueColumns = `s.cache_key, s.due_at_ms, s.flags, s.effective_interval_ms, s.stored_interval_ms, s.rank_interval_ms`

// sortedBelow is the cap under which a capped pass always reads in due order: a few thousand
// rows sort in no time, and a pass capped that low (the sweep's maxRows 1, for the head alone)
// wants exactly the earliest.
const sortedBelow = 10_000

// IterateDue implements store.Pass: every row due from its shard's floor up to now, of the
// shards the pass works on, read from the pass's snapshot in one query and decoded straight
// from the wire. F1 puts no row below its shard's floor. In a cluster, a shard's rows are read
// only if the snapshot shows the node holding the shard at the epoch it believes (Options.Node).
//
// The order is the cheapest that gives the caller what it asked for. When the due rows fit
// under maxRows (or maxRows is 0), they come as the table holds them: the sweep scores every
// one, and sorting half a million rows would cost the database more than reading them. When
// the cap may bind — it is under sortedBelow, or the last pass found at least half of it due
// — the pass reads the earliest maxRows in (due, key) order, as the contract's capped pass
// must. A pass that finds the cap binding unexpectedly stops there, capped, with the rows it
// had read, and the next pass reads in order.
func (p *pass) IterateDue(maxRows, chunk int, fn func([]store.DueRow) error) error {
	switch {
	case p.isClosed():
		return store.ErrClosed
	case p.iterated:
		return store.ErrPassIterated
	case maxRows < 0 || chunk <= 0:
		return fmt.Errorf("%w: maxRows %d, chunk %d", store.ErrInvalidArgument, maxRows, chunk)
	}
	p.iterated = true
	ctx := context.Background()
	args := []any{p.stats.NowMs}
	from, args := p.set.from(args)
	held, args := p.set.held(args)
	q := `SELECT ` + dueColumns + ` FROM ` + from + ` JOIN freshq_floor f ON f.shard = o.shard
		JOIN freshq_schedule s ON s.shard = o.shard AND s.due_at_ms >= f.floor_ms AND s.due_at_ms <= $1
		WHERE ` + held
	var limit any // NULL: no limit
	if maxRows > 0 {
		limit = maxRows + 1 // one more tells a capped pass from one that read everything
		if maxRows < sortedBelow || p.s.lastDue.Load() >= int64(maxRows/2) {
			q += ` ORDER BY s.due_at_ms, s.cache_key`
		}
	}
	rows, err := p.tx.Query(ctx, q+fmt.Sprintf(` LIMIT $%d`, len(args)+1), append(args, limit)...)
	if err != nil {
		return fmt.Errorf("pgstore: iterate due: %w", err)
	}
	defer rows.Close()
	buf := make([]store.DueRow, 0, chunk)
	arena := make([]byte, 0, chunk*96)
	for rows.Next() {
		if maxRows > 0 && p.stats.Rows == maxRows {
			p.stats.Capped = true
			break
		}
		key, row, err := decodeDue(rows.RawValues())
		if err != nil {
			return fmt.Errorf("pgstore: iterate due: %w", err)
		}
		if len(arena)+len(key) > cap(arena) {
			arena = make([]byte, 0, max(cap(arena), 2*len(key)))
		}
		arena = append(arena, key...)
		buf = append(buf, store.DueRow{Key: arena[len(arena)-len(key) : len(arena) : len(arena)], Row: row})
		if !p.stats.HasFirstDue || row.DueAtMs < p.stats.FirstDueMs {
			p.stats.FirstDueMs, p.stats.HasFirstDue = row.DueAtMs, true
		}
		p.stats.Rows++
		if len(buf) == chunk {
			if err := fn(buf); err != nil {
				return err
			}
			buf, arena = buf[:0], arena[:0]
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: iterate due: %w", err)
	}
	if len(buf) > 0 {
		if err := fn(buf); err != nil {
			return err
		}
	}
	due := int64(p.stats.Rows)
	if p.stats.Capped {
		due++ // at least
	}
	p.s.lastDue.Store(due)
	if !p.stats.Capped {
		p.stats.Complete = true
		next, ok, err := nextDue(ctx, p.tx, p.set, p.stats.NowMs)
		if err != nil {
			return err
		}
		p.stats.NextDueMs, p.stats.HasNextDue = next, ok
	}
	return nil
}

// nextDue is the earliest due time past nowMs in the shards of ss, one index probe per shard.
func nextDue(ctx context.Context, q pgx.Tx, ss shardSet, nowMs int64) (int64, bool, error) {
	var next *int64
	from, args := ss.from([]any{nowMs})
	err := q.QueryRow(ctx, `SELECT min(x.d) FROM `+from+` CROSS JOIN LATERAL
		(SELECT s.due_at_ms AS d FROM freshq_schedule s WHERE s.shard = o.shard AND s.due_at_ms > $1
		 ORDER BY s.due_at_ms LIMIT 1) x`, args...).Scan(&next)
	if err != nil {
		return 0, false, fmt.Errorf("pgstore: next due: %w", err)
	}
	if next == nil {
		return 0, false, nil
	}
	return *next, true, nil
}

// decodeDue decodes one row of dueColumns from its binary wire values, without the
// reflection of Scan: a pass reads hundreds of thousands of them.
func decodeDue(vals [][]byte) ([]byte, store.Row, error) {
	if len(vals) != 6 || len(vals[1]) != 8 || len(vals[2]) != 2 || len(vals[3]) != 8 || len(vals[4]) != 8 || len(vals[5]) != 8 {
		return nil, store.Row{}, fmt.Errorf("%w: unexpected due row shape", store.ErrCorruption)
	}
	c := rowCols{
		due:    int64(binary.BigEndian.Uint64(vals[1])),
		flags:  int16(binary.BigEndian.Uint16(vals[2])),
		eff:    int64(binary.BigEndian.Uint64(vals[3])),
		stored: int64(binary.BigEndian.Uint64(vals[4])),
		rank:   int64(binary.BigEndian.Uint64(vals[5])),
	}
	r, err := c.row()
	if err != nil {
		return nil, r, fmt.Errorf("due row %q: %w", vals[0], err)
	}
	return vals[0], r, nil
}

// Stats implements store.Pass.
func (p *pass) Stats() store.PassStats { return p.stats }

// AdvanceFloor implements store.Pass, under the shards' floor locks (doc.go): it locks every
// floor row in shard order, which waits for each write holding one to commit; reads each
// shard's earliest due row in a new statement, which sees those writes; and raises each floor
// to min(that row, now) − guardMs where that is higher. The node's floor cell and head follow
// by compare-and-swap from the values read before the locks were taken, while the locks are
// still held. It does nothing before the pass has iterated, and after its first advance: a
// pass advances at most once.
func (p *pass) AdvanceFloor(guardMs int64) (int64, bool) {
	s := p.s
	if guardMs < 0 || !p.iterated || p.advanced || p.isClosed() || s.closed.Load() {
		return s.floor.Load(), false
	}
	p.advanced = true
	if s.opts.TestSignals.Mutations.AdvancesNaively() {
		return s.naiveAdvance(p, guardMs)
	}
	moved, err := s.advance(p.set, p.stats.NowMs, guardMs, s.floor.Load(), s.head.Load())
	if err != nil {
		s.log.Error().Err(err).Msg("floor advance failed")
		return s.floor.Load(), false
	}
	return s.floor.Load(), moved
}

// advance is AdvanceFloor's transaction over the shards of ss. It returns whether any shard's
// floor moved. In a cluster it first locks the shards' lease rows too (heldShards) and
// advances only the shards the node still holds at their epochs: a node that lost a shard
// while paused, partitioned or slow never raises its floor, and no other node can acquire
// the shard until this transaction ends.
//
// The cell and the head are raised from observed and observedHead before the transaction
// commits, while it holds every floor row's lock. A write of this node lowers them only once
// it holds its shards' locks, so none can lower them between this transaction's read of the
// first due rows and the compare-and-swap. Raised after the commit instead, a write that
// locked its shard in between would lower its shard's floor in the database, find the cell
// still at observed (below its due time) and leave it, and the swap would then lift the cell
// and head over its row. Should the commit fail after the swap, the cell and head still bound
// every row that existed under the locks, and every later write lowers them itself.
func (s *Store) advance(ss shardSet, nowMs, guardMs, observed, observedHead int64) (moved bool, err error) {
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("pgstore: advance: %w", err)
	}
	// Every return ends the transaction, the early ones with nothing to advance included: an
	// open one would keep its pooled connection, and the floor and lease rows it locked.
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	if len(ss.shards) == 0 {
		return false, nil
	}
	if _, err := tx.Exec(ctx, `SELECT f.shard FROM freshq_floor f WHERE f.shard = ANY($1) ORDER BY f.shard FOR UPDATE`, ss.shards); err != nil {
		return false, fmt.Errorf("pgstore: advance: lock the floors: %w", err)
	}
	held, err := heldShards(ctx, tx, ss)
	if err != nil {
		return false, fmt.Errorf("pgstore: advance: %w", err)
	}
	s.fenced(FencedAdvance, len(ss.shards)-len(held))
	if len(held) == 0 {
		return false, nil
	}
	heldList := make([]int32, 0, len(held))
	for _, sh := range ss.shards {
		if held[sh] {
			heldList = append(heldList, sh)
		}
	}
	// Each shard's first row from its floor: F1 holds under the locks, and below the floor lie
	// only the dead index entries of the rows rescheduled since the last vacuum.
	rows, err := tx.Query(ctx, `SELECT f.shard, f.floor_ms, x.d FROM freshq_floor f LEFT JOIN LATERAL
		(SELECT s.due_at_ms AS d FROM freshq_schedule s WHERE s.shard = f.shard AND s.due_at_ms >= f.floor_ms ORDER BY s.due_at_ms LIMIT 1) x ON true
		WHERE f.shard = ANY($1)`, heldList)
	if err != nil {
		return false, fmt.Errorf("pgstore: advance: read the first due rows: %w", err)
	}
	var shards []int32
	var floors []int64
	minFloor, head := int64(math.MaxInt64), int64(math.MaxInt64)
	for rows.Next() {
		var shard int32
		var floor int64
		var first *int64
		if err := rows.Scan(&shard, &floor, &first); err != nil {
			rows.Close()
			return false, fmt.Errorf("pgstore: advance: %w", err)
		}
		bound := nowMs
		if first != nil {
			bound = min(bound, *first)
		}
		head = min(head, bound)
		if to := bound - guardMs; to > floor {
			shards, floors = append(shards, shard), append(floors, to)
			floor = to
		}
		minFloor = min(minFloor, floor)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("pgstore: advance: %w", err)
	}
	if len(shards) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE freshq_floor f SET floor_ms = v.floor
			FROM unnest($1::int[], $2::bigint[]) AS v(shard, floor) WHERE f.shard = v.shard`, shards, floors); err != nil {
			return false, fmt.Errorf("pgstore: advance: %w", err)
		}
	}
	// Under every held shard's lock the minimum is exact: raised from what was observed (a
	// write of this node that lowered the cell since makes the swap fail), and lowered when a
	// write of another node, which lowers only the database's floor, put a row below the cell.
	switch {
	case minFloor > observed:
		s.floor.Advance(observed, minFloor)
	case minFloor < observed:
		s.floor.Lower(minFloor)
	}
	switch {
	case head > observedHead:
		s.head.CompareAndSwap(observedHead, head)
	case head < observedHead:
		lowerTo(&s.head, head)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("pgstore: advance: %w", err)
	}
	return len(shards) > 0, nil
}

// naiveAdvance is the advance the floor protocol forbids (store.Mutations.NaiveAdvance, in
// test builds only): every shard's floor set to min(first due row the pass saw, now) − guard,
// without the locks, so a row written after the pass's snapshot can land below it.
func (s *Store) naiveAdvance(p *pass, guardMs int64) (int64, bool) {
	bound := p.stats.NowMs
	if p.stats.HasFirstDue {
		bound = min(bound, p.stats.FirstDueMs)
	}
	to := bound - guardMs
	tag, err := s.pool.Exec(context.Background(), `UPDATE freshq_floor SET floor_ms = $1 WHERE floor_ms < $1 AND shard = ANY($2)`, to, p.set.shards)
	if err != nil || tag.RowsAffected() == 0 {
		return s.floor.Load(), false
	}
	cur := s.floor.Load()
	s.floor.Advance(cur, to)
	return to, true
}

// Close implements store.Pass.
func (p *pass) Close() {
	s := p.s
	s.passMu.Lock()
	if p.closed {
		s.passMu.Unlock()
		return
	}
	p.closed = true
	delete(s.passes, p)
	s.passMu.Unlock()
	_ = p.tx.Rollback(context.Background())
}

// ScanDue implements store.Store: the due rows from floorMs, read per shard through the due
// index and merged by the database (scan).
//
// Each shard is read from floorMs or its own floor, whichever is later: by F1 no row lies below
// its shard's floor, and the index entries between the two are those of rows rescheduled out
// of the shard's head, dead until a vacuum. The store's head (HeadMs, the claim path's start)
// is the earliest shard's, so starting every shard there would step through the others'.
func (s *Store) ScanDue(floorMs, nowMs int64, limit int) (store.ScanResult, error) {
	return s.scan(`s.due_at_ms >= greatest($4, f.floor_ms)`, []any{floorMs}, nowMs, limit)
}

// ScanDueAfter implements store.Store: strictly after (afterMs, afterKey) in (due, key) order.
func (s *Store) ScanDueAfter(afterMs int64, afterKey []byte, nowMs int64, limit int) (store.ScanResult, error) {
	if afterMs < 0 {
		return s.ScanDue(0, nowMs, limit)
	}
	return s.scan(`(s.due_at_ms, s.cache_key) > ($4, $5::bytea)`, []any{afterMs, afterKey}, nowMs, limit)
}

// scanPerShard is how many rows a scan for limit rows first reads from each of shards shards:
// twice what an even spread of limit + 1 rows would put in one, and four more. The merge is
// exact only up to the first shard whose rows it used up (scanShards), so a spread that is
// uneven enough costs a second read; reading limit + 1 from every shard would cost that much
// every time (256 shards and a page of 64: 16,640 rows to merge for 65).
func scanPerShard(limit, shards int) int {
	return 4 + (2*(limit+1)+shards-1)/max(shards, 1)
}

// scan reads the due rows up to nowMs that satisfy from (on s and f, with $4… bound to fromArgs),
// per held shard through the due index, merged in (due, key) order. It reads scanPerShard rows
// of each shard first, and every shard's limit + 1 if that merge was not exact.
func (s *Store) scan(from string, fromArgs []any, nowMs int64, limit int) (store.ScanResult, error) {
	var res store.ScanResult
	if limit <= 0 {
		return res, fmt.Errorf("%w: limit %d", store.ErrInvalidArgument, limit)
	}
	if s.closed.Load() {
		return res, store.ErrClosed
	}
	ctx := context.Background()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return res, fmt.Errorf("pgstore: scan: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	ss := s.ownedSet()
	res, exact, err := scanShards(ctx, tx, ss, from, fromArgs, nowMs, limit, scanPerShard(limit, len(ss.shards)))
	if err == nil && !exact {
		s.scanRereads.Add(1)
		// Exact: no shard can run out before limit + 1 rows are merged.
		res, _, err = scanShards(ctx, tx, ss, from, fromArgs, nowMs, limit, limit+1)
	}
	if err != nil {
		return store.ScanResult{}, fmt.Errorf("pgstore: scan: %w", err)
	}
	if len(res.Rows) > 0 {
		res.FirstDueMs, res.HasFirstDue = res.Rows[0].DueAtMs, true
	}
	if !res.Capped {
		next, ok, err := nextDue(ctx, tx, ss, nowMs)
		if err != nil {
			return store.ScanResult{}, err
		}
		res.NextDueMs, res.HasNextDue = next, ok
	}
	return res, nil
}

// scanShards is one read of scan: the first perShard rows of every held shard from from up to
// nowMs, merged in (due, key) order, of which it keeps up to limit. A shard of which it read
// perShard rows may hold more, each after the last read, so the merge is the store's order
// only up to the earliest such last row: exact is false when that row came before limit + 1
// rows were merged, and the rows are then not the scan's.
func scanShards(ctx context.Context, tx pgx.Tx, ss shardSet, from string, fromArgs []any, nowMs int64, limit, perShard int) (res store.ScanResult, exact bool, err error) {
	args := append([]any{nowMs, perShard, limit + 1}, fromArgs...) // from's arguments are $4 on
	shardsFrom, args := ss.from(args)
	held, args := ss.held(args)
	rows, err := tx.Query(ctx, `SELECT x.* FROM `+shardsFrom+` JOIN freshq_floor f ON f.shard = o.shard CROSS JOIN LATERAL
		(SELECT `+dueColumns+`, s.shard FROM freshq_schedule s WHERE s.shard = o.shard AND `+from+` AND s.due_at_ms <= $1
		 ORDER BY s.due_at_ms, s.cache_key LIMIT $2) x
		WHERE `+held+`
		ORDER BY x.due_at_ms, x.cache_key LIMIT $3`, args...)
	if err != nil {
		return res, false, err
	}
	defer rows.Close()
	read := map[int32]int{} // rows merged, by shard
	for rows.Next() {
		if len(res.Rows) == limit {
			res.Capped = true
			break
		}
		vals := rows.RawValues()
		if len(vals) != 7 || len(vals[6]) != 4 {
			return res, false, fmt.Errorf("%w: unexpected scan row shape", store.ErrCorruption)
		}
		key, row, err := decodeDue(vals[:6])
		if err != nil {
			return res, false, err
		}
		res.Rows = append(res.Rows, store.DueRow{Key: append([]byte(nil), key...), Row: row})
		shard := int32(binary.BigEndian.Uint32(vals[6]))
		read[shard]++
		if read[shard] == perShard && perShard <= limit {
			return res, false, nil // this shard's next row may come before the merge's next
		}
	}
	rows.Close()
	return res, true, rows.Err()
}
