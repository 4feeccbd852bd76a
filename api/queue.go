package api

import (
	"net/http"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
)

// QueueView answers GET /v1/queue: the floor and what pins it, the ready set, the backlog by lane,
// grants by source and the leases in use, all read from shared memory.
type QueueView struct {
	Floor struct {
		Ms            int64  `json:"ms"`
		PinnedKeyHash uint64 `json:"pinned_key_hash,omitempty"`
		PinnedSinceMs int64  `json:"pinned_since_ms,omitempty"`
		NextDueMs     int64  `json:"next_due_ms,omitempty"`
		AdvancedAtMs  int64  `json:"advanced_at_ms,omitempty"`
	} `json:"floor"`
	Ready struct {
		Enabled       bool    `json:"enabled"`
		Generation    uint64  `json:"generation"`
		Count         uint64  `json:"count"`
		Taken         uint64  `json:"taken"`
		PublishedAtMs int64   `json:"published_at_ms,omitempty"`
		SweepMs       float64 `json:"sweep_ms"`
		SweepRows     uint64  `json:"sweep_rows"`
		Capped        uint64  `json:"sweeps_capped"`
		DroppedKeys   uint64  `json:"dropped_long_keys"`
	} `json:"ready"`
	Backlog    map[string]uint64 `json:"backlog"`
	BelowFloor uint64            `json:"below_floor"`
	Claims     map[string]uint64 `json:"claims"`
	Leases     shm.LeaseStats    `json:"leases"`
}

// Queue serves /v1/queue.
type Queue struct {
	Seg *shm.Segment
	Now func() int64
}

// Register adds the endpoint to mux.
func (q *Queue) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/queue", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, q.View()) })
}

// View reads the queue's state.
func (q *Queue) View() QueueView {
	var v QueueView
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
	v.Leases = q.Seg.Leases().Stats(q.Now())
	return v
}
