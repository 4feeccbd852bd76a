package funnel

import (
	"bytes"
	"fmt"

	"github.com/freshq/freshq/store"
)

// checkDue applies Config.RefuseImplausibleDue to a prepared put.
func (f *Funnel) checkDue(o *op) error {
	if f.cfg.RefuseImplausibleDue && !store.PlausibleDue(o.row.DueAtMs) {
		return fmt.Errorf("%w: %d ms", store.ErrImplausibleDue, o.row.DueAtMs)
	}
	return nil
}

// WriteSchedule files one schedule through the funnel and returns once it has committed.
func (f *Funnel) WriteSchedule(sch store.Schedule) error {
	return f.WriteSchedules([]store.Write{{Schedule: sch}})
}

// WriteSchedules files ws through the funnel and returns once all of them have committed.
//
// Each Write is atomic: its row, index entry, target and page commit together or not at all.
// The call as a whole is atomic only while it fits one Badger transaction (about 15 % of a
// memtable, tens of thousands of writes); a larger call is committed in several, in order, and
// if one fails the error is returned after the others are done, so some writes of a failed
// call may be durable. Writes of one key apply in slice order.
//
// When a call fails after some of its writes committed, the error is a *PartialWriteError
// saying which: a caller that must act once per durable write (worker 0 releases a result's
// lease once its write is durable) acts on those, and retries only the rest.
//
// Nothing is enqueued if any Write is invalid (ErrScheduleUnset, ErrInvalidTarget,
// ErrInvalidPage, ErrImplausibleDue). After Close it returns ErrClosed.
func (f *Funnel) WriteSchedules(ws []store.Write) error {
	if len(ws) == 0 {
		return nil
	}
	ops := make([]op, len(ws))
	for i := range ws {
		if err := ops[i].preparePut(&ws[i]); err != nil {
			return fmt.Errorf("store: write %d of %d: %w", i+1, len(ws), err)
		}
		if err := f.checkDue(&ops[i]); err != nil {
			return fmt.Errorf("store: write %d of %d: %w", i+1, len(ws), err)
		}
	}
	_, err := f.submit(ops)
	return partial(ops, err)
}

// partial turns the error of a failed call into a *PartialWriteError when some of its ops
// committed. The committer is done with ops once submit returns.
func partial(ops []op, err error) error {
	if err == nil {
		return nil
	}
	var committed []bool
	for i := range ops {
		if ops[i].applied {
			if committed == nil {
				committed = make([]bool, len(ops))
			}
			committed[i] = true
		}
	}
	if committed == nil {
		return err
	}
	return &store.PartialWriteError{Committed: committed, Err: err}
}

// DeleteTarget removes every record of cacheKey — schedule row, due-index entry, target and
// page — in one transaction, through the funnel. Deleting a key that has no records is not an
// error.
func (f *Funnel) DeleteTarget(cacheKey []byte) error {
	if err := store.ValidateKey(cacheKey); err != nil {
		return err
	}
	o := op{kind: opDelete}
	o.setKeys(append([]byte(nil), cacheKey...), true, true)
	_, err := f.submit([]op{o})
	return err
}

// Modify files the writes its Changes decide, each over its key's row and target as the
// funnel's transaction reads them (see Change): one read of each per change, where a caller
// that read them itself would have the funnel read the row again. It reports which changes
// were filed; a Decide that returned ok false, and one whose key vanished, leave false.
//
// A Change may be decided more than once, each time on a fresh read, when its transaction is
// rebuilt (a write refused, a transaction Badger finds too big); only the last decision is
// filed. The due time each returns must be at least its MinDueMs, which the funnel registers
// for the floor protocol before any Decide runs; a Write due earlier fails with
// ErrInvalidArgument. Errors are those of WriteSchedules, PartialWriteError included.
func (f *Funnel) Modify(changes []store.Change) ([]bool, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	ops := make([]op, len(changes))
	for i := range changes {
		if err := prepareModify(&ops[i], &changes[i]); err != nil {
			return nil, fmt.Errorf("store: change %d of %d: %w", i+1, len(changes), err)
		}
	}
	_, err := f.submit(ops)
	applied := make([]bool, len(ops))
	for i := range ops {
		applied[i] = ops[i].applied
	}
	return applied, partial(ops, err)
}

func prepareModify(o *op, c *store.Change) error {
	if err := store.ValidateKey(c.Key); err != nil {
		return err
	}
	if c.Decide == nil {
		return fmt.Errorf("%w: a change without Decide", store.ErrInvalidArgument)
	}
	if c.MinDueMs < 0 {
		return store.ErrNegativeDue
	}
	*o = op{kind: opModify, decide: c.Decide, minDue: c.MinDueMs}
	o.setKeys(append([]byte(nil), c.Key...), false, false)
	return nil
}

// checkModified refuses a decided write that is not the Change's key, or due before the
// Change said it could be.
func checkModified(key []byte, minDue int64, got []byte, dueMs int64) error {
	if !bytes.Equal(key, got) {
		return fmt.Errorf("%w: the change of %q decided a write of %q", store.ErrInvalidArgument, key, got)
	}
	if dueMs < minDue {
		return fmt.Errorf("%w: the change of %q decided due %d, before its MinDueMs %d", store.ErrInvalidArgument, key, dueMs, minDue)
	}
	return nil
}

// RefileIfAbsent files the schedules of ws only for keys that have no schedule row when the
// funnel applies them, and reports how many it filed. Reconcile uses it so that a row written
// between its scan and its repair is not overwritten. A Write's Target only supplies the
// stored interval; it is not rewritten.
func (f *Funnel) RefileIfAbsent(ws []store.Write) (int, error) {
	ops := make([]op, len(ws))
	for i := range ws {
		w := ws[i]
		t := w.Target
		w.Target = nil
		if err := ops[i].preparePut(&w); err != nil {
			return 0, err
		}
		if err := f.checkDue(&ops[i]); err != nil {
			return 0, err
		}
		ops[i].kind = opPutIfAbsent
		if t != nil {
			ops[i].hasMirror, ops[i].mirror = true, store.MirrorOf(t)
		}
	}
	return f.submit(ops)
}

// RefileIfUnchanged files sch only if cacheKey's schedule row is exactly was when the funnel
// applies the write, and reports whether it filed it. The sweep's unpin hatch uses it: the row
// it files forward is the one a pass read in its snapshot, and a write committed since (the
// row's render result, an operator's change) is newer than that picture and must stand.
func (f *Funnel) RefileIfUnchanged(sch store.Schedule, was store.Row) (bool, error) {
	var o op
	if err := o.preparePut(&store.Write{Schedule: sch}); err != nil {
		return false, err
	}
	if err := f.checkDue(&o); err != nil {
		return false, err
	}
	o.kind, o.was = opPutIfUnchanged, was
	n, err := f.submit([]op{o})
	return n == 1, err
}
