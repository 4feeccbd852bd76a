package api

import (
	"net/http"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// Queue serves /v1/queue.
type Queue struct {
	Seg *shm.Segment
	Now func() int64
}

// Register adds the endpoint to mux.
func (q *Queue) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/queue", func(w http.ResponseWriter, r *http.Request) { ok(w, q.View()) })
}

// View reads the queue's state.
func (q *Queue) View() wire.QueueView {
	var v wire.QueueView
	f := q.Seg.Floor()
	v.Floor.Ms = f.Load()
	v.Floor.PinnedKeyHash, v.Floor.PinnedSinceMs = f.Pin()
	v.Floor.NextDueMs, v.Floor.AdvancedAtMs = f.NextDue(), f.AdvancedAt()
	rs := q.Seg.Ready().Stats()
	v.Ready.Enabled, v.Ready.Generation, v.Ready.Count, v.Ready.Taken = rs.Enabled, rs.Gen, rs.Count, rs.Taken
	v.Ready.PublishedAtMs, v.Ready.DroppedKeys = rs.PublishedAtMs, rs.DroppedKeys
	w0, _ := q.Seg.Worker(0)
	v.Ready.SweepMs = float64(w0.Load(shm.CounterSweepMicros)) / 1000
	v.Ready.SweepRows, v.Ready.Capped = w0.Load(shm.CounterSweepRows), w0.Load(shm.CounterSweepCapped)
	v.Backlog = map[string]uint64{}
	for l := range policy.NumLanes {
		v.Backlog[l.String()] = w0.Load(shm.CounterBacklog + shm.Counter(l))
	}
	v.BelowFloor = w0.Load(shm.CounterBelowFloor)
	v.Claims = map[string]uint64{}
	for i := range int(q.Seg.Layout().Workers) {
		w, _ := q.Seg.Worker(i)
		v.Claims["ready"] += w.Load(shm.CounterClaimReady)
		v.Claims["index"] += w.Load(shm.CounterClaimIndex)
	}
	v.Leases = wire.LeaseStats(q.Seg.Leases().Stats(q.Now()))
	return v
}
