package capacity

import (
	"errors"

	"github.com/freshq/freshq/store"
)

// WrapStore returns st with every committed write reported to l (its demand) and every render
// result to m (capacity; m may be nil); reads pass through. A write is reported after it
// committed, and only if it did (a partial failure reports the writes its PartialWriteError
// says committed).
func WrapStore(st store.Store, l *Ledger, m *Meter) store.Store {
	return wrappedStore{Store: st, l: l, m: m}
}

// wrappedStore is a store whose writes (the funnel's: WriteSchedule, WriteSchedules,
// RefileIfUnchanged, DeleteTarget, Modify) are reported to the ledger and the meter.
type wrappedStore struct {
	store.Store
	l *Ledger
	m *Meter
}

// rowOf is the row a schedule put files (its stored interval is the funnel's to fill).
func rowOf(s store.Schedule) store.Row {
	return store.Row{DueAtMs: s.DueAtMs(), Projection: store.Projection{Submitted: s.Submitted(),
		EffectiveIntervalMs: s.EffectiveIntervalMs(), Lanes: s.Lanes()}}
}

// committed reports which of n writes committed, given the call's error.
func committed(n int, err error) []bool {
	out := make([]bool, n)
	if err == nil {
		for i := range out {
			out[i] = true
		}
		return out
	}
	if pe := (*store.PartialWriteError)(nil); errors.As(err, &pe) {
		copy(out, pe.Committed)
	}
	return out
}

func (x wrappedStore) WriteSchedule(s store.Schedule) error {
	err := x.Store.WriteSchedule(s)
	if err == nil {
		x.l.Put(s.Key(), rowOf(s), nil)
	}
	return err
}

func (x wrappedStore) WriteSchedules(ws []store.Write) error {
	err := x.Store.WriteSchedules(ws)
	for i, ok := range committed(len(ws), err) {
		if ok {
			x.l.Put(ws[i].Schedule.Key(), rowOf(ws[i].Schedule), ws[i].Target)
		}
	}
	return err
}

// RefileIfUnchanged (the sweep's unpin hatch) files the row at a new due time with the cadence
// it resolved: the demand is the same, but the row is reported like any other write.
func (x wrappedStore) RefileIfUnchanged(s store.Schedule, was store.Row) (bool, error) {
	filed, err := x.Store.RefileIfUnchanged(s, was)
	if err == nil && filed {
		x.l.Put(s.Key(), rowOf(s), nil)
	}
	return filed, err
}

func (x wrappedStore) DeleteTarget(key []byte) error {
	err := x.Store.DeleteTarget(key)
	if err == nil {
		x.l.Delete(key)
	}
	return err
}

// decided is what a Change's Decide saw and returned.
type decided struct {
	cur store.Current
	w   store.Write
	ok  bool
}

// Modify reports each filed change's write, and each render result to the meter: a write whose
// target records a render later than the stored one is a render that completed.
func (x wrappedStore) Modify(cs []store.Change) ([]bool, error) {
	seen := make([]decided, len(cs))
	wrappedCs := make([]store.Change, len(cs))
	for i, c := range cs {
		decide := c.Decide
		c.Decide = func(cur store.Current) (store.Write, bool, error) {
			w, ok, err := decide(cur)
			seen[i] = decided{cur: cur, w: w, ok: ok && err == nil}
			return w, ok, err
		}
		wrappedCs[i] = c
	}
	filed, err := x.Store.Modify(wrappedCs)
	done := committed(len(cs), err)
	for i := range cs {
		if !done[i] || (err == nil && (i >= len(filed) || !filed[i])) || !seen[i].ok {
			continue
		}
		d := seen[i]
		x.l.Put(cs[i].Key, rowOf(d.w.Schedule), d.w.Target)
		if x.m != nil && d.w.Target != nil && d.w.Target.LastRender.AtMs > d.cur.Target.LastRender.AtMs {
			x.m.Record(d.w.Target.LastRender.AtMs, kindOf(d.cur))
		}
	}
	return filed, err
}

// kindOf says whether a render of the row cur is one of its cadence, a retry of a failing row,
// or a recheck of a sealed target.
func kindOf(cur store.Current) Kind {
	switch {
	case cur.HasTarget && cur.Target.Terminal != store.TerminalNone:
		return KindRecheck
	case cur.HasRow && cur.Row.Failing:
		return KindRetry
	}
	return KindCadence
}
