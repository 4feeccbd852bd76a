package store

import (
	"errors"
	"fmt"
	"math"

	"github.com/dgraph-io/badger/v4"
)

// This file is the funnel: the only code that writes to Badger. It alone writes the s/ and
// d/ prefixes (TestFunnelIsTheOnlyWriter parses the package to prove it), so the two
// invariants of the keyspace hold by construction:
//
//   - a schedule row and its due-index entry change in one transaction: the old d/ key (read
//     from the row as the transaction sees it) is deleted and the new one set, so there is
//     never an index entry without its row or a row without its index entry;
//   - every put states fromSitemap and the effective interval (Schedule can only be built by
//     NewSchedule), because a put replaces the record and an omitted field would silently
//     erase a correct value.
//
// Group commit. Callers enqueue requests; one committer goroutine takes the first waiting
// request, gathers whatever else is already queued (up to Options.MaxBatchWrites writes), and
// applies the batch in as few Badger transactions as fit (a transaction holds at most 15 % of a
// memtable; the batch is cut before ErrTxnTooBig, and re-cut if Badger disagrees). Writes apply
// in arrival order, so two writes of one key in one batch end as the later one. Each caller
// is acknowledged only after every transaction holding its writes has committed.
//
// Floor. Before the first transaction of a batch commits, the committer registers the batch
// and lowers the floor to the batch's earliest new due time, inside the critical section it
// shares with sweep passes (protocol.go).

// Schedule is one schedule put for the funnel. Its fields are unexported: the only way to make
// one is NewSchedule, which takes every field of the record explicitly. The funnel rejects the
// zero value with ErrScheduleUnset.
type Schedule struct {
	key []byte
	row Row // row.StoredIntervalMs is the funnel's to fill
	set bool
}

// NewSchedule builds the schedule put of cacheKey: due at dueAtMs, from a sitemap or not, with
// the given effective interval (0 = absent, resolved from configuration at score time) and
// lane inputs. It copies cacheKey. The projection's StoredIntervalMs is not an argument: the
// funnel mirrors it from the target (see Projection).
func NewSchedule(cacheKey []byte, dueAtMs int64, fromSitemap bool, effectiveIntervalMs int64, lanes Lanes) (Schedule, error) {
	if err := validateKey(cacheKey); err != nil {
		return Schedule{}, err
	}
	if dueAtMs < 0 {
		return Schedule{}, ErrNegativeDue
	}
	if effectiveIntervalMs < 0 {
		return Schedule{}, ErrNegativeInterval
	}
	return Schedule{
		key: append([]byte(nil), cacheKey...),
		row: Row{DueAtMs: dueAtMs, Projection: Projection{
			FromSitemap:         fromSitemap,
			EffectiveIntervalMs: effectiveIntervalMs,
			Lanes:               lanes,
		}},
		set: true,
	}, nil
}

// Key returns the schedule's cacheKey. The caller must not modify it.
func (s Schedule) Key() []byte { return s.key }

// DueAtMs returns the due time.
func (s Schedule) DueAtMs() int64 { return s.row.DueAtMs }

// FromSitemap returns the fromSitemap fact.
func (s Schedule) FromSitemap() bool { return s.row.FromSitemap }

// EffectiveIntervalMs returns the effective interval (0 = absent).
func (s Schedule) EffectiveIntervalMs() int64 { return s.row.EffectiveIntervalMs }

// Lanes returns the lane inputs.
func (s Schedule) Lanes() Lanes { return s.row.Lanes }

// Write is one funnel write: a schedule put, and optionally the target and page of the same
// key, all committed in one transaction. A render result is one Write: its reschedule, its
// target update and its page, with no other store write.
type Write struct {
	Schedule Schedule
	Target   *Target // if set, replaces t/; its StoredIntervalMs is mirrored into the row
	Page     *Page   // if set, replaces p/
}

// WriteSchedule files one schedule through the funnel and returns once it has committed.
func (s *Store) WriteSchedule(sch Schedule) error {
	return s.WriteSchedules([]Write{{Schedule: sch}})
}

// WriteSchedules files ws through the funnel and returns once all of them have committed.
//
// Each Write is atomic: its row, index entry, target and page commit together or not at all.
// The call as a whole is atomic only while it fits one Badger transaction (about 15 % of a
// memtable, tens of thousands of writes); a larger call is committed in several, in order, and
// if one fails the error is returned after the others are done, so some writes of a failed
// call may be durable. Writes of one key apply in slice order.
//
// Nothing is enqueued if any Write is invalid (ErrScheduleUnset, ErrInvalidTarget,
// ErrInvalidPage). After Close it returns ErrClosed.
func (s *Store) WriteSchedules(ws []Write) error {
	if len(ws) == 0 {
		return nil
	}
	ops := make([]op, len(ws))
	for i := range ws {
		if err := ops[i].preparePut(&ws[i]); err != nil {
			return fmt.Errorf("store: write %d of %d: %w", i+1, len(ws), err)
		}
	}
	_, err := s.submit(ops)
	return err
}

// DeleteTarget removes every record of cacheKey — schedule row, due-index entry, target and
// page — in one transaction, through the funnel. Deleting a key that has no records is not an
// error.
func (s *Store) DeleteTarget(cacheKey []byte) error {
	if err := validateKey(cacheKey); err != nil {
		return err
	}
	o := op{kind: opDelete}
	o.setKeys(append([]byte(nil), cacheKey...))
	_, err := s.submit([]op{o})
	return err
}

// refileIfAbsent files the schedules of ws only for keys that have no schedule row when the
// funnel applies them, and reports how many it filed. Reconcile uses it so that a row written
// between its scan and its repair is not overwritten. A Write's Target only supplies the
// stored interval; it is not rewritten.
func (s *Store) refileIfAbsent(ws []Write) (int, error) {
	ops := make([]op, len(ws))
	for i := range ws {
		w := ws[i]
		t := w.Target
		w.Target = nil
		if err := ops[i].preparePut(&w); err != nil {
			return 0, err
		}
		ops[i].kind = opPutIfAbsent
		if t != nil {
			ops[i].hasStored, ops[i].storedMs = true, t.StoredIntervalMs
		}
	}
	return s.submit(ops)
}

type opKind uint8

const (
	opPut opKind = iota
	opPutIfAbsent
	opDelete
)

// op is one prepared funnel write. Keys and encoded values are built by the caller's
// goroutine, so the committer only reads the old row, encodes 44 bytes and calls Badger.
type op struct {
	kind      opKind
	key       []byte // cacheKey
	sKey      []byte
	dKey      []byte // due-index key of the new row (puts)
	tKey      []byte
	pKey      []byte
	row       Row
	hasStored bool // storedMs overrides the carried-over stored interval
	storedMs  int64
	target    []byte // encoded target, or nil
	page      []byte // encoded page, or nil
	applied   bool   // set by the committer: staged in a transaction that committed
	failed    bool   // set by the committer: refused, excluded from its transaction
}

func (o *op) setKeys(cacheKey []byte) {
	o.key = cacheKey
	o.sKey = scheduleKey(cacheKey)
	o.tKey = targetKey(cacheKey)
	o.pKey = pageKey(cacheKey)
}

func (o *op) preparePut(w *Write) error {
	sch := w.Schedule
	if !sch.set {
		return ErrScheduleUnset
	}
	*o = op{kind: opPut, row: sch.row}
	o.setKeys(sch.key)
	o.dKey = dueKey(sch.row.DueAtMs, sch.key)
	if w.Target != nil {
		v, err := w.Target.MarshalBinary()
		if err != nil {
			return err
		}
		o.target, o.hasStored, o.storedMs = v, true, w.Target.StoredIntervalMs
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

// request is one caller's submission, acknowledged on done.
type request struct {
	ops  []op
	err  error // first error of any of its ops or transactions; committer-owned until done
	done chan error
}

// submit enqueues ops as one request and waits for its acknowledgement. It returns how many
// ops were applied (opPutIfAbsent skips existing rows).
func (s *Store) submit(ops []op) (int, error) {
	req := &request{ops: ops, done: make(chan error, 1)}
	s.sendMu.RLock()
	if s.sendClosed {
		s.sendMu.RUnlock()
		return 0, ErrClosed
	}
	s.reqs <- req
	s.sendMu.RUnlock()
	err := <-req.done
	n := 0
	for i := range ops {
		if ops[i].applied {
			n++
		}
	}
	return n, err
}

// commitLoop is the committer goroutine. It exits when reqs is closed and drained.
func (s *Store) commitLoop() {
	defer close(s.committerDone)
	var batch []*request
	var refs []opRef
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
		refs = s.commitBatch(batch, refs[:0])
		clear(batch)
	}
}

// opRef names one op of one request in a batch.
type opRef struct {
	r *request
	o *op
}

// commitBatch applies and commits one batch, then acknowledges its requests.
func (s *Store) commitBatch(batch []*request, refs []opRef) []opRef {
	minDue := int64(math.MaxInt64)
	for _, r := range batch {
		for i := range r.ops {
			o := &r.ops[i]
			refs = append(refs, opRef{r, o})
			if o.kind != opDelete && o.row.DueAtMs < minDue {
				minDue = o.row.DueAtMs
			}
		}
	}
	s.beginInflight(minDue)
	if s.opts.testBeforeCommit != nil {
		s.opts.testBeforeCommit()
	}

	// Cut the batch into transactions by Badger's own size accounting.
	maxCount, maxSize := s.db.MaxBatchCount()-1, s.db.MaxBatchSize()-1
	start, count, size := 0, int64(0), int64(0)
	for i, ref := range refs {
		c, z := s.opCost(ref.o)
		if i > start && (count+c >= maxCount || size+z >= maxSize) {
			s.commitSegment(refs[start:i])
			start, count, size = i, 0, 0
		}
		count += c
		size += z
	}
	s.commitSegment(refs[start:])

	s.endInflight()
	for _, r := range batch {
		r.done <- r.err
	}
	clear(refs)
	return refs
}

// commitSegment applies refs in one transaction and commits it. A write is never
// half-applied: when one fails after staging part of itself (Badger refusing an entry), the
// transaction is discarded and rebuilt without it; when Badger finds the transaction too big
// after all (its accounting changed under us), it is discarded and the segment split in two.
func (s *Store) commitSegment(refs []opRef) {
	if len(refs) == 0 {
		return
	}
	for {
		txn := s.db.NewTransaction(true)
		rebuild := false
		for _, ref := range refs {
			if ref.o.failed {
				continue
			}
			staged, err := s.apply(txn, ref.o)
			if err == nil {
				continue
			}
			if errors.Is(err, badger.ErrTxnTooBig) && len(refs) > 1 {
				txn.Discard()
				resetApplied(refs)
				s.commitSegment(refs[:len(refs)/2])
				s.commitSegment(refs[len(refs)/2:])
				return
			}
			ref.o.failed = true
			fail(ref.r, err)
			s.log.Error().Err(err).Msg("funnel write refused")
			if staged {
				rebuild = true
				break
			}
		}
		if rebuild {
			txn.Discard()
			resetApplied(refs)
			continue
		}
		if err := txn.Commit(); err != nil {
			err = fmt.Errorf("store: commit %d writes: %w", len(refs), err)
			s.log.Error().Err(err).Msg("funnel commit failed")
			for _, ref := range refs {
				fail(ref.r, err)
			}
			resetApplied(refs)
		}
		return
	}
}

func resetApplied(refs []opRef) {
	for _, ref := range refs {
		ref.o.applied = false
	}
}

func fail(r *request, err error) {
	if r.err == nil {
		r.err = err
	}
}

// opCost is an upper bound of what o adds to Badger's per-transaction accounting
// (Txn.checkSize: per entry, key + value + 2 meta bytes + 10 version bytes, a value at or
// above the threshold counting as a 12-byte pointer).
func (s *Store) opCost(o *op) (count, size int64) {
	th := s.opts.ValueThreshold
	entry := func(k, v int) {
		vl := int64(v)
		if vl >= th {
			vl = 12
		}
		count++
		size += int64(k) + vl + 12
	}
	dueLen := dueKeyHeaderLen + len(o.key)
	entry(dueLen, 0) // delete the old d/ key
	entry(len(o.sKey), rowLen)
	switch o.kind {
	case opDelete:
		entry(len(o.tKey), 0)
		entry(len(o.pKey), 0)
	default:
		entry(dueLen, projectionLen)
		if o.target != nil {
			entry(len(o.tKey), len(o.target))
		}
		if o.page != nil {
			entry(len(o.pKey), len(o.page))
		}
	}
	return count, size
}

// apply stages o in txn. staged reports whether any entry of o reached the transaction before
// an error, in which case the transaction must be discarded, not committed.
func (s *Store) apply(txn *badger.Txn, o *op) (staged bool, err error) {
	var old Row
	had := false
	item, err := txn.Get(o.sKey)
	switch {
	case err == nil:
		if err := item.Value(old.UnmarshalBinary); err != nil {
			return false, fmt.Errorf("store: read schedule row %q: %w", o.key, err)
		}
		had = true
	case errors.Is(err, badger.ErrKeyNotFound):
	default:
		return false, fmt.Errorf("store: read schedule row %q: %w", o.key, err)
	}
	// From here on every Set and Delete goes through stage, which records that the
	// transaction now holds part of o.
	stage := func(e error) error {
		if e == nil {
			staged = true
			return nil
		}
		return fmt.Errorf("store: write %q: %w", o.key, e)
	}

	switch o.kind {
	case opDelete:
		if had {
			if err := stage(txn.Delete(dueKey(old.DueAtMs, o.key))); err != nil {
				return staged, err
			}
			if err := stage(txn.Delete(o.sKey)); err != nil {
				return staged, err
			}
		}
		if err := stage(txn.Delete(o.tKey)); err != nil {
			return staged, err
		}
		if err := stage(txn.Delete(o.pKey)); err != nil {
			return staged, err
		}
		o.applied = true
		return staged, nil
	case opPutIfAbsent:
		if had {
			return false, nil
		}
	}

	row := o.row
	switch {
	case o.hasStored:
		row.StoredIntervalMs = o.storedMs
	case had:
		row.StoredIntervalMs = old.StoredIntervalMs
	}
	vals := make([]byte, 0, rowLen+projectionLen)
	vals, _ = row.AppendBinary(vals) // validated by NewSchedule and the target's Validate
	vals, _ = row.Projection.AppendBinary(vals)
	rowVal, projVal := vals[:rowLen:rowLen], vals[rowLen:]

	if had && old.DueAtMs != row.DueAtMs {
		if err := stage(txn.Delete(dueKey(old.DueAtMs, o.key))); err != nil {
			return staged, err
		}
	}
	if err := stage(txn.Set(o.dKey, projVal)); err != nil {
		return staged, err
	}
	if err := stage(txn.Set(o.sKey, rowVal)); err != nil {
		return staged, err
	}
	if o.target != nil {
		if err := stage(txn.Set(o.tKey, o.target)); err != nil {
			return staged, err
		}
	}
	if o.page != nil {
		if err := stage(txn.Set(o.pKey, o.page)); err != nil {
			return staged, err
		}
	}
	o.applied = true
	return staged, nil
}
