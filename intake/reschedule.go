package intake

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// Rescheduling after a change of the cadences (routes[].interval, render.default_interval,
// render.demand.ladder), by a reload or by a restart with another file. A render files its row
// due one cadence later and carries that cadence on the row (EffectiveIntervalMs), so the rows
// rendered before the change stay due by the old cadence until their next render: a route cut
// from 6 h to 3 m would leave its pages due hours later, served stale.
//
// Reschedule moves them. A row whose carried cadence exceeds what the configuration in force
// allows it (policy.CadenceBound) was filed under a longer one; it is refiled carrying the
// bound, due at most one bound after the time its due time was filed from:
//
//	due' = max(min(due, due − carried + bound, lastRender + bound), min(head, now))
//
// (due − carried is the render or the check that filed it, or earlier: a crawler's visit or an
// operator's recache only ever moves a due time up; lastRender, the target's last render, bounds
// a due time freshness filed past one cadence, at a ceiling stretched for a short capacity; a
// page verified by a 304 since its last render may so be checked once early). A due time
// already past stays past, so the row ranks by how late it really is, but never below the
// floor (nor below now, should the floor be past it).
//
// Lengthening moves nothing: a row keeps the due time it has, renders then, and from that
// render on is filed by the new cadence (Apply). Telling a due time the old cadence filed from
// one a crawler's visit, a rush or a recache filed would need what the row does not record; an
// early render costs one render of the page, a late one serves it stale.
//
// What needs moving is derived from the rows themselves, never from a list in memory: a moved
// row carries the bound and is not found again, so an interrupted run (a restart, a stop)
// leaves whole rows only, and the next run (at worker 0's next start, or the next reload)
// finishes the job. Failing and never-rendered rows are left alone: their due time is a
// retry's or a first render's, and their next attempt files by the configuration in force.
//
// The work is bounded: one read-only scan of the schedule rows, and the rows to move written
// in chunks of RescheduleChunk, each under its keys' locks through the funnel's
// read-modify-write (store.Change), which checks the row again before it refiles it.

// RescheduleChunk bounds one write of a reschedule: the keys locked and refiled at once.
const RescheduleChunk = 512

// RescheduleProgress is where a reschedule run stands.
type RescheduleProgress struct {
	Scanned int // schedule rows read
	Moved   int // rows refiled at their new cadence
	Done    bool
}

// Reschedule refiles every row filed under a longer cadence than the configuration in force
// allows (see the comment above), in chunks, calling progress after each chunk written and
// once at the end. It stops early, leaving whole rows only, when ctx ends.
func (t *Targets) Reschedule(ctx context.Context, progress func(RescheduleProgress)) (RescheduleProgress, error) {
	var out RescheduleProgress
	pol := t.Policy() // one policy for the whole run: a reload meanwhile starts another run
	var pending [][]byte
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		n, err := t.rescheduleChunk(pol, pending)
		out.Moved += n
		pending = pending[:0]
		if err != nil {
			return err
		}
		if progress != nil {
			progress(out)
		}
		return ctx.Err() // a stop between two chunks
	}
	err := t.store.ForEachSchedule(nil, func(key []byte, row store.Row) error {
		if out.Scanned%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		out.Scanned++
		if _, ok := moveTo(pol, key, row); !ok {
			return nil
		}
		pending = append(pending, bytes.Clone(key))
		if len(pending) == RescheduleChunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return out, err
		}
		var se *StoreError
		if errors.As(err, &se) {
			return out, err
		}
		return out, &StoreError{err}
	}
	out.Done = true
	if progress != nil {
		progress(out)
	}
	return out, nil
}

// moveTo is the bound row of key is to carry, and whether it must move to it.
func moveTo(pol *policy.Policy, key []byte, row store.Row) (boundMs int64, ok bool) {
	if row.Failing || row.NeverRendered || row.DueAtMs <= 0 || row.DueAtMs >= policy.MaxDueMs {
		return 0, false
	}
	r := policy.Row{Key: key, Row: row}
	boundMs = pol.CadenceBound(&r)
	return boundMs, row.EffectiveIntervalMs > boundMs
}

// rescheduleChunk refiles keys under their locks, each checked again in the funnel's
// transaction, and reports how many it refiled.
func (t *Targets) rescheduleChunk(pol *policy.Policy, keys [][]byte) (int, error) {
	defer t.lock(keys)()
	now := t.clock()
	minDue := min(t.store.HeadMs(), now)
	changes := make([]store.Change, len(keys))
	for i, k := range keys {
		changes[i] = store.Change{Key: k, MinDueMs: minDue, Decide: func(cur store.Current) (store.Write, bool, error) {
			if !cur.HasRow || cur.NotOwner {
				return store.Write{}, false, nil
			}
			row := cur.Row
			bound, ok := moveTo(pol, k, row)
			if !ok {
				return store.Write{}, false, nil // rendered or refiled meanwhile
			}
			lastRender := int64(0)
			if cur.HasTarget {
				lastRender = cur.Target.LastRender.AtMs
			}
			due := freshness.RefiledDue(row.DueAtMs, row.EffectiveIntervalMs, bound, lastRender, minDue)
			sch, err := store.NewSchedule(k, due, row.Submitted, bound, row.Lanes)
			if err == nil {
				sch, err = keepRank(sch, row)
			}
			if err != nil {
				return store.Write{}, false, fmt.Errorf("intake: reschedule of %q: %w", k, err)
			}
			return store.Write{Schedule: sch}, true, nil
		}}
	}
	applied, err := t.writer().Modify(changes)
	n := 0
	for _, ok := range applied {
		if ok {
			n++
		}
	}
	if err != nil {
		return n, &StoreError{err}
	}
	return n, nil
}
