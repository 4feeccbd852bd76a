package sweep

import (
	"sync"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// Changes tells a sweep which rows were written after its pass took its snapshot. The pass
// scored a stale version of such a row; publishing it could hand out a row whose render was
// just committed, and render it twice. Every schedule write in worker 0 goes through Wrap, so
// nothing can forget to tell.
//
// A key counts as changed for a sweep if its write was in flight when the sweep began, or began
// while the sweep ran. A write that began and ended before the sweep began is in the snapshot.
// Memory is bounded by the writes of one sweep, not of the interval between sweeps.
type Changes struct {
	mu       sync.Mutex
	active   bool
	inflight map[uint64]int      // key hash → writes of it in flight
	changed  map[uint64]struct{} // keys changed for the sweep in progress
}

// NewChanges returns an empty tracker.
func NewChanges() *Changes {
	return &Changes{inflight: map[uint64]int{}, changed: map[uint64]struct{}{}}
}

func (c *Changes) begin(keys [][]byte) []uint64 {
	hs := make([]uint64, len(keys))
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range keys {
		h := shm.KeyHash(k)
		hs[i] = h
		c.inflight[h]++
		if c.active {
			c.changed[h] = struct{}{}
		}
	}
	return hs
}

func (c *Changes) end(hs []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		if c.inflight[h]--; c.inflight[h] <= 0 {
			delete(c.inflight, h)
		}
	}
}

// sweepBegin is called before the pass takes its snapshot.
func (c *Changes) sweepBegin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active = true
	clear(c.changed)
	for h := range c.inflight {
		c.changed[h] = struct{}{}
	}
}

func (c *Changes) changedSince(h uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.changed[h]
	return ok
}

func (c *Changes) sweepEnd() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active = false
	clear(c.changed)
}

// Writer is the store's write side.
type Writer interface {
	WriteSchedule(store.Schedule) error
	WriteSchedules([]store.Write) error
	RefileIfUnchanged(sch store.Schedule, was store.Row) (bool, error)
	DeleteTarget(cacheKey []byte) error
	Modify(changes []store.Change) ([]bool, error)
}

// Wrap returns w with every write registered with c.
func (c *Changes) Wrap(w Writer) Writer { return trackedWriter{w: w, c: c} }

type trackedWriter struct {
	w Writer
	c *Changes
}

func (t trackedWriter) WriteSchedule(s store.Schedule) error {
	hs := t.c.begin([][]byte{s.Key()})
	defer t.c.end(hs)
	return t.w.WriteSchedule(s)
}

func (t trackedWriter) RefileIfUnchanged(s store.Schedule, was store.Row) (bool, error) {
	hs := t.c.begin([][]byte{s.Key()})
	defer t.c.end(hs)
	return t.w.RefileIfUnchanged(s, was)
}

// DeleteTarget is a write like any other: a sweep whose snapshot still holds the row must not
// publish it once it is gone.
func (t trackedWriter) DeleteTarget(key []byte) error {
	hs := t.c.begin([][]byte{key})
	defer t.c.end(hs)
	return t.w.DeleteTarget(key)
}

func (t trackedWriter) WriteSchedules(ws []store.Write) error {
	keys := make([][]byte, len(ws))
	for i := range ws {
		keys[i] = ws[i].Schedule.Key()
	}
	hs := t.c.begin(keys)
	defer t.c.end(hs)
	return t.w.WriteSchedules(ws)
}

func (t trackedWriter) Modify(cs []store.Change) ([]bool, error) {
	keys := make([][]byte, len(cs))
	for i := range cs {
		keys[i] = cs[i].Key
	}
	hs := t.c.begin(keys)
	defer t.c.end(hs)
	return t.w.Modify(cs)
}
