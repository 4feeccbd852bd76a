package pgstore

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/freshq/freshq/store"
)

// This file is the funnel: the only code that writes schedule rows, targets, pages and floors.
// Callers prepare ops on their own goroutine (keys, encoded values); the committer gathers the
// queued requests into one transaction:
//
//	lock the floor rows of every shard the batch touches, in shard order   (round trip 1,
//	read the schedule rows (and targets, for Modify) the batch replaces     pipelined)
//	decide and fold the ops, in arrival order, into one final state per key
//	write rows, targets, pages; lower the floors; commit                   (round trip 2, 3)

type opKind uint8

const (
	opPut opKind = iota
	opPutIfAbsent
	opPutIfUnchanged
	opDelete
	opModify
)

// op is one prepared funnel write.
type op struct {
	kind      opKind
	key       []byte
	shard     int32
	row       store.Row // puts: the new row; its mirror (store.Mirror) filled by the committer
	was       store.Row // opPutIfUnchanged
	hasMirror bool      // mirror replaces what the row carries over (store.Mirror)
	mirror    store.Mirror
	target    []byte // encoded target to set, or nil
	page      []byte // encoded page to set, or nil
	dropPage  bool
	decide    func(store.Current) (store.Write, bool, error)
	minDue    int64
	notOwner  bool // opModify: the node does not hold the key's shard (Current.NotOwner)
	applied   bool
	err       error
}

type request struct {
	ops  []op
	done chan error
}

// WriteSchedule implements store.Store.
func (s *Store) WriteSchedule(sch store.Schedule) error {
	return s.WriteSchedules([]store.Write{{Schedule: sch}})
}

// WriteSchedules implements store.Store. The call is one transaction: all of it commits or
// none (never a store.PartialWriteError). Nothing is enqueued if any Write is invalid.
func (s *Store) WriteSchedules(ws []store.Write) error {
	if len(ws) == 0 {
		return nil
	}
	ops := make([]op, len(ws))
	for i := range ws {
		if err := s.preparePut(&ops[i], &ws[i]); err != nil {
			return fmt.Errorf("pgstore: write %d of %d: %w", i+1, len(ws), err)
		}
	}
	return s.submit(ops)
}

// Modify implements store.Store: the rows and targets of the changes are read in the
// transaction that files them, with the shards' floor rows locked, so no other write of the
// key (from this node or another) comes between the read and the commit.
func (s *Store) Modify(changes []store.Change) ([]bool, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	ops := make([]op, len(changes))
	for i, c := range changes {
		if err := store.ValidateKey(c.Key); err != nil {
			return nil, fmt.Errorf("pgstore: change %d of %d: %w", i+1, len(changes), err)
		}
		if c.Decide == nil {
			return nil, fmt.Errorf("pgstore: change %d of %d: %w: no Decide", i+1, len(changes), store.ErrInvalidArgument)
		}
		if c.MinDueMs < 0 {
			return nil, fmt.Errorf("pgstore: change %d of %d: %w", i+1, len(changes), store.ErrNegativeDue)
		}
		key := append([]byte(nil), c.Key...)
		ops[i] = op{kind: opModify, key: key, shard: Shard(key, s.shards), decide: c.Decide, minDue: c.MinDueMs}
	}
	err := s.submit(ops)
	applied := make([]bool, len(ops))
	for i := range ops {
		applied[i] = ops[i].applied
	}
	return applied, err
}

// RefileIfUnchanged implements store.Store.
func (s *Store) RefileIfUnchanged(sch store.Schedule, was store.Row) (bool, error) {
	var o op
	if err := s.preparePut(&o, &store.Write{Schedule: sch}); err != nil {
		return false, err
	}
	o.kind, o.was = opPutIfUnchanged, was
	ops := []op{o}
	err := s.submit(ops)
	return ops[0].applied, err
}

// DeleteTarget implements store.Store.
func (s *Store) DeleteTarget(cacheKey []byte) error {
	if err := store.ValidateKey(cacheKey); err != nil {
		return err
	}
	key := append([]byte(nil), cacheKey...)
	return s.submit([]op{{kind: opDelete, key: key, shard: Shard(key, s.shards)}})
}

// refileIfAbsent files ws only for keys without a schedule row (Reconcile).
func (s *Store) refileIfAbsent(ws []store.Write) (int, error) {
	ops := make([]op, len(ws))
	for i := range ws {
		w := ws[i]
		t := w.Target
		w.Target = nil
		if err := s.preparePut(&ops[i], &w); err != nil {
			return 0, err
		}
		ops[i].kind = opPutIfAbsent
		if t != nil {
			ops[i].hasMirror, ops[i].mirror = true, store.MirrorOf(t)
		}
	}
	err := s.submit(ops)
	n := 0
	for i := range ops {
		if ops[i].applied {
			n++
		}
	}
	return n, err
}

func (s *Store) preparePut(o *op, w *store.Write) error {
	sch := w.Schedule
	if sch.Key() == nil {
		return store.ErrScheduleUnset
	}
	row := sch.Row() // every field the schedule files, the rank interval included
	if s.opts.RefuseImplausibleDue && !store.PlausibleDue(row.DueAtMs) {
		return fmt.Errorf("%w: %d ms", store.ErrImplausibleDue, row.DueAtMs)
	}
	*o = op{kind: opPut, key: sch.Key(), shard: Shard(sch.Key(), s.shards), row: row}
	o.dropPage = w.DropPage && w.Page == nil
	if w.Target != nil {
		v, err := w.Target.MarshalBinary()
		if err != nil {
			return err
		}
		o.target, o.hasMirror, o.mirror = v, true, store.MirrorOf(w.Target)
	}
	if w.Page != nil {
		v, err := w.Page.MarshalBinary()
		if err != nil {
			return err
		}
		o.page = v
	}
	return nil
}

// submit enqueues ops as one request and waits for its acknowledgement.
func (s *Store) submit(ops []op) error {
	req := &request{ops: ops, done: make(chan error, 1)}
	s.sendMu.RLock()
	if s.sendClosed {
		s.sendMu.RUnlock()
		return store.ErrClosed
	}
	s.reqs <- req
	s.sendMu.RUnlock()
	return <-req.done
}

func (s *Store) commitLoop() {
	defer close(s.committerDone)
	var batch []*request
	for req := range s.reqs {
		batch = append(batch[:0], req)
		n := len(req.ops)
	gather:
		for n < s.opts.MaxBatchWrites {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break gather
				}
				batch = append(batch, r)
				n += len(r.ops)
			default:
				break gather
			}
		}
		err := s.commitBatch(batch)
		for _, r := range batch {
			rerr := err
			for i := range r.ops {
				if err != nil {
					r.ops[i].applied = false
				} else if r.ops[i].err != nil && rerr == nil {
					rerr = r.ops[i].err
				}
			}
			r.done <- rerr
		}
		clear(batch)
	}
}

// keyState is a key as the batch leaves it, folded op by op.
type keyState struct {
	shard       int32
	row         store.Row
	exists      bool
	rowChanged  bool
	target      []byte // encoded; nil with targetSet means deleted
	targetSet   bool   // the batch writes or deletes the target
	targetRead  bool   // target holds the stored value (read for a Modify)
	hasTarget   bool
	page        []byte
	pageSet     bool // the batch writes or deletes the page
	deleted     bool // the batch deleted the key (then maybe re-created it)
	needsTarget bool
}

// commitBatch runs one batch in one transaction. An error fails every op of the batch; an op's
// own error (a Decide that failed or decided something the funnel refuses) fails only its
// request and leaves the op unapplied.
func (s *Store) commitBatch(reqs []*request) (err error) {
	ctx := context.Background()
	var ops []*op
	shardSet := map[int32]struct{}{}
	keys := map[string]*keyState{}
	var keyList, modifyKeys [][]byte
	minDue := int64(math.MaxInt64)
	for _, r := range reqs {
		for i := range r.ops {
			o := &r.ops[i]
			ops = append(ops, o)
			shardSet[o.shard] = struct{}{}
			switch o.kind {
			case opModify:
				minDue = min(minDue, o.minDue)
			case opDelete:
			default:
				minDue = min(minDue, o.row.DueAtMs)
			}
			ks, ok := keys[string(o.key)]
			if !ok {
				ks = &keyState{shard: o.shard}
				keys[string(o.key)] = ks
				keyList = append(keyList, o.key)
			}
			if o.kind == opModify && !ks.needsTarget {
				ks.needsTarget = true
				modifyKeys = append(modifyKeys, o.key)
			}
		}
	}
	shards := make([]int32, 0, len(shardSet))
	for sh := range shardSet {
		shards = append(shards, sh)
	}
	slices.Sort(shards)

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(ctx)
			err = fmt.Errorf("pgstore: commit %d writes: %w", len(ops), err)
			s.log.Error().Err(err).Msg("funnel commit failed")
		}
	}()

	// Round trip 1: lock the shards, then read what the batch replaces.
	b := &pgx.Batch{}
	b.Queue(`SELECT shard FROM freshq_floor WHERE shard = ANY($1) ORDER BY shard FOR UPDATE`, shards)
	b.Queue(`SELECT cache_key, due_at_ms, flags, effective_interval_ms, stored_interval_ms, rank_interval_ms
		FROM freshq_schedule WHERE cache_key = ANY($1)`, keyList)
	if len(modifyKeys) > 0 {
		b.Queue(`SELECT cache_key, value FROM freshq_target WHERE cache_key = ANY($1)`, modifyKeys)
	}
	br := tx.SendBatch(ctx, b)
	if err := readLocked(br); err != nil {
		br.Close()
		return err
	}
	if err := readRows(br, keys); err != nil {
		br.Close()
		return err
	}
	if len(modifyKeys) > 0 {
		if err := readTargets(br, keys); err != nil {
			br.Close()
			return err
		}
	}
	if err := br.Close(); err != nil {
		return err
	}
	// A result is applied only for a shard the node still holds: its lease row is locked with
	// the floors, so no acquire by another node can commit before this transaction does.
	var held map[int32]bool
	if s.opts.Node != "" && len(modifyKeys) > 0 {
		if held, err = s.lockHeldForResults(ctx, tx, ops); err != nil {
			return err
		}
	}
	// The shards are locked: no advance can run until this commits, so lowering the cell
	// now is seen by every advance that could miss this batch's rows (doc.go).
	if minDue != math.MaxInt64 {
		s.floor.Lower(minDue)
		lowerTo(&s.head, minDue)
	}

	for _, o := range ops {
		if o.kind == opModify && held != nil && !held[o.shard] {
			o.notOwner = true
		}
		s.fold(o, keys[string(o.key)])
	}
	if err := s.write(ctx, tx, keys); err != nil {
		return err
	}
	if s.opts.TestSignals.BeforeCommit != nil {
		s.opts.TestSignals.BeforeCommit()
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return nil
}

// lockHeldForResults locks the lease rows of the shards of the batch's results and returns
// the shards the node holds; a shard it does not believe it holds is not held.
func (s *Store) lockHeldForResults(ctx context.Context, tx pgx.Tx, ops []*op) (map[int32]bool, error) {
	mine := s.ownedSet()
	epochOf := make(map[int32]int64, len(mine.shards))
	for i, sh := range mine.shards {
		epochOf[sh] = mine.epochs[i]
	}
	set := shardSet{node: mine.node}
	seen := map[int32]bool{}
	for _, o := range ops {
		if e, ok := epochOf[o.shard]; ok && o.kind == opModify && !seen[o.shard] {
			seen[o.shard] = true
			set.shards, set.epochs = append(set.shards, o.shard), append(set.epochs, e)
		}
	}
	if len(set.shards) == 0 {
		return map[int32]bool{}, nil
	}
	return heldShards(ctx, tx, set)
}

func readLocked(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

func readRows(br pgx.BatchResults, keys map[string]*keyState) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	var key []byte
	var c rowCols
	for rows.Next() {
		if err := rows.Scan(&key, &c.due, &c.flags, &c.eff, &c.stored, &c.rank); err != nil {
			return err
		}
		r, err := c.row()
		if err != nil {
			return fmt.Errorf("schedule row %q: %w", key, err)
		}
		if ks := keys[string(key)]; ks != nil {
			ks.row, ks.exists = r, true
		}
	}
	return rows.Err()
}

func readTargets(br pgx.BatchResults, keys map[string]*keyState) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	var key, v []byte
	for rows.Next() {
		if err := rows.Scan(&key, &v); err != nil {
			return err
		}
		if ks := keys[string(key)]; ks != nil {
			ks.target, ks.targetRead, ks.hasTarget = slices.Clone(v), true, true
		}
	}
	for _, ks := range keys {
		if ks.needsTarget && !ks.hasTarget {
			ks.targetRead = true // read, and absent
		}
	}
	return rows.Err()
}

// fold applies o to its key's state, in arrival order, as the Badger funnel applies ops.
func (s *Store) fold(o *op, ks *keyState) {
	switch o.kind {
	case opDelete:
		ks.exists, ks.rowChanged, ks.deleted = false, true, true
		ks.target, ks.targetSet, ks.hasTarget, ks.targetRead = nil, true, false, true
		ks.page, ks.pageSet = nil, true
		o.applied = true
		return
	case opPutIfAbsent:
		if ks.exists {
			return
		}
	case opPutIfUnchanged:
		if !ks.exists || ks.row != o.was {
			return
		}
	case opModify:
		put, ok := s.decided(o, ks)
		if !ok {
			return
		}
		s.fold(&put, ks)
		o.applied = put.applied
		return
	}
	row := o.row
	switch {
	case o.hasMirror:
		row.SetMirror(o.mirror)
	case ks.exists:
		row.SetMirror(ks.row.Mirror())
	}
	ks.row, ks.exists, ks.rowChanged = row, true, true
	if o.target != nil {
		ks.target, ks.targetSet, ks.hasTarget, ks.targetRead = o.target, true, true, true
	}
	if o.page != nil {
		ks.page, ks.pageSet = o.page, true
	} else if o.dropPage {
		ks.page, ks.pageSet = nil, true
	}
	o.applied = true
}

// decided runs a Modify's Decide on its key's state and prepares the put it returns.
func (s *Store) decided(o *op, ks *keyState) (op, bool) {
	cur := store.Current{Row: ks.row, HasRow: ks.exists, HasTarget: ks.hasTarget, NotOwner: o.notOwner}
	if ks.hasTarget {
		if err := cur.Target.UnmarshalBinary(ks.target); err != nil {
			o.err = fmt.Errorf("pgstore: target %q: %w", o.key, err)
			return op{}, false
		}
	}
	w, ok, err := o.decide(cur)
	if o.notOwner {
		s.fenced(FencedResult, 1)
		return op{}, false
	}
	if err != nil || !ok {
		o.err = err
		return op{}, false
	}
	var put op
	if err := s.preparePut(&put, &w); err != nil {
		o.err = fmt.Errorf("pgstore: change of %q: %w", o.key, err)
		return op{}, false
	}
	switch {
	case string(put.key) != string(o.key):
		o.err = fmt.Errorf("pgstore: %w: the change of %q decided a write of %q", store.ErrInvalidArgument, o.key, put.key)
		return op{}, false
	case put.row.DueAtMs < o.minDue:
		o.err = fmt.Errorf("pgstore: %w: the change of %q decided due %d, before its MinDueMs %d", store.ErrInvalidArgument, o.key, put.row.DueAtMs, o.minDue)
		return op{}, false
	}
	return put, true
}

// write stages the batch's final state of every key, and lowers the shards' floors to the
// earliest due time filed in each, with one statement per table.
func (s *Store) write(ctx context.Context, tx pgx.Tx, keys map[string]*keyState) error {
	var (
		delKeys                                [][]byte
		rowKeys                                [][]byte
		rowShards                              []int32
		dues, effs, storeds, ranks, classes    []int64
		flags                                  []int16
		tKeys, tVals, tDel, pKeys, pVals, pDel [][]byte
		floorShards                            []int32
		floorDues                              []int64
	)
	for k, ks := range keys {
		key := []byte(k)
		if ks.deleted && !ks.exists {
			delKeys = append(delKeys, key)
		} else if ks.deleted {
			// Deleted and re-created in one batch: the old target and page are gone unless
			// the re-creation wrote them.
			if !ks.targetSet || ks.target == nil {
				tDel = append(tDel, key)
			}
			if !ks.pageSet || ks.page == nil {
				pDel = append(pDel, key)
			}
		}
		if ks.exists && ks.rowChanged {
			rowKeys = append(rowKeys, key)
			rowShards = append(rowShards, ks.shard)
			dues = append(dues, ks.row.DueAtMs)
			flags = append(flags, int16(ks.row.Flags()))
			effs = append(effs, ks.row.EffectiveIntervalMs)
			storeds = append(storeds, ks.row.StoredIntervalMs)
			ranks = append(ranks, ks.row.RankIntervalMs)
			classes = append(classes, s.classValue(key, ks.row.Projection))
			floorShards = append(floorShards, ks.shard)
			floorDues = append(floorDues, ks.row.DueAtMs)
		}
		if ks.exists && ks.targetSet && ks.target != nil {
			tKeys, tVals = append(tKeys, key), append(tVals, ks.target)
		}
		if ks.exists && ks.pageSet {
			if ks.page != nil {
				pKeys, pVals = append(pKeys, key), append(pVals, ks.page)
			} else if !ks.deleted {
				pDel = append(pDel, key)
			}
		}
	}
	if ws := s.writerFloorShard(); ws >= 0 {
		for i := range floorShards {
			floorShards[i] = ws
		}
	}
	b := &pgx.Batch{}
	if len(delKeys) > 0 {
		b.Queue(`DELETE FROM freshq_schedule WHERE cache_key = ANY($1)`, delKeys)
		b.Queue(`DELETE FROM freshq_target WHERE cache_key = ANY($1)`, delKeys)
		b.Queue(`DELETE FROM freshq_page WHERE cache_key = ANY($1)`, delKeys)
	}
	if len(tDel) > 0 {
		b.Queue(`DELETE FROM freshq_target WHERE cache_key = ANY($1)`, tDel)
	}
	if len(pDel) > 0 {
		b.Queue(`DELETE FROM freshq_page WHERE cache_key = ANY($1)`, pDel)
	}
	if len(rowKeys) > 0 {
		b.Queue(`INSERT INTO freshq_schedule (cache_key, shard, due_at_ms, flags, effective_interval_ms, stored_interval_ms, rank_interval_ms, class)
			SELECT * FROM unnest($1::bytea[], $2::int[], $3::bigint[], $4::smallint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
			ON CONFLICT (cache_key) DO UPDATE SET due_at_ms = EXCLUDED.due_at_ms, flags = EXCLUDED.flags,
				effective_interval_ms = EXCLUDED.effective_interval_ms, stored_interval_ms = EXCLUDED.stored_interval_ms,
				rank_interval_ms = EXCLUDED.rank_interval_ms, class = EXCLUDED.class`,
			rowKeys, rowShards, dues, flags, effs, storeds, ranks, classes)
		b.Queue(`UPDATE freshq_floor f SET floor_ms = v.due
			FROM (SELECT shard, min(due) AS due FROM unnest($1::int[], $2::bigint[]) AS x(shard, due) GROUP BY shard) v
			WHERE f.shard = v.shard AND v.due < f.floor_ms`, floorShards, floorDues)
	}
	if len(tKeys) > 0 {
		b.Queue(`INSERT INTO freshq_target (cache_key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[])
			ON CONFLICT (cache_key) DO UPDATE SET value = EXCLUDED.value`, tKeys, tVals)
	}
	if len(pKeys) > 0 {
		b.Queue(`INSERT INTO freshq_page (cache_key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[])
			ON CONFLICT (cache_key) DO UPDATE SET value = EXCLUDED.value`, pKeys, pVals)
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// lowerTo is a CAS-min on an atomic.
func lowerTo(a interface {
	Load() int64
	CompareAndSwap(old, new int64) bool
}, ms int64) {
	for {
		cur := a.Load()
		if ms >= cur || a.CompareAndSwap(cur, ms) {
			return
		}
	}
}
