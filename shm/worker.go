package shm

import (
	"fmt"
	"sync/atomic"
)

// Each worker process owns one block. Only that worker writes it (the supervisor writes pid and
// restarts between incarnations); the supervisor reads every block for /metrics and for its
// watchdog, which pings systemd only while heartbeats advance.
//
// Block layout (64 + 8·CountersPerWorker bytes):
//
//	0   pid          uint64
//	8   heartbeat    int64   ms of the last beat
//	16  beats        uint64  beats since the segment was created
//	24  startedAt    int64   ms, when the current incarnation attached
//	32  restarts     uint64  incarnations after the first, written by the supervisor
//	40  (reserved)
//	64  counters     [CountersPerWorker]uint64, indexed by Counter
type Worker struct {
	pid, heartbeat, beats, startedAt, restarts *uint64
	counters                                   uint64 // offset of counter 0
	seg                                        *Segment
}

// Counter names one per-worker counter slot. The numbering is part of the layout: a new counter
// takes a free slot, and renumbering one requires a new LayoutVersion.
type Counter uint8

// Counters. Gauges (set, not added) are marked.
const (
	CounterClaimReady      Counter = iota // grants served from the ready set
	CounterClaimIndex                     // grants served from the floored index scan
	CounterLeaseRefused                   // takes refused at grant time by the lease table
	CounterRenderOK                       // renders that succeeded
	CounterRenderTransient                // renders that failed and will be retried
	CounterRenderPermanent                // renders that failed deterministically
	CounterRenderMicros                   // total render time, µs
	CounterResultsDropped                 // results given up after the delivery bound
	CounterSweeps                         // sweeps finished (worker 0)
	CounterSweepFailures                  // sweeps that failed or panicked (worker 0)
	CounterSweepMicros                    // gauge: duration of the last sweep, µs (worker 0)
	CounterSweepRows                      // gauge: rows the last sweep read (worker 0)
	CounterSweepCapped                    // sweeps that stopped at sweep_cap (worker 0)
	CounterCadenceCarried                 // rows scored with the cadence they carried (worker 0)
	CounterCadenceResolved                // rows whose cadence was resolved from config (worker 0)
	CounterBelowFloor                     // gauge: rows found below the floor (worker 0)
)

// Counter ranges after the named counters.
const (
	// CounterRenderOutcome is the first of NumRenderOutcomes counters, one per renderer
	// outcome, in the order the worker's metrics layer names them.
	CounterRenderOutcome Counter = 16
	// CounterRenderSeconds is the first counter of the render-duration histogram: one count
	// per bucket of RenderSecondsBuckets, one for +Inf, then the sum in µs.
	CounterRenderSeconds = CounterRenderOutcome + NumRenderOutcomes
	// CounterLateness is the first counter of the lateness-ratio histograms at grant, one per
	// lane: for each lane, one count per bucket of LatenessBuckets, one for +Inf, then the sum
	// in millionths.
	CounterLateness = CounterRenderSeconds + Counter(len(RenderSecondsBuckets)) + 2
	// CounterBacklog is the first of NumLanes gauges: due rows per lane at the last sweep
	// (worker 0).
	CounterBacklog = CounterLateness + NumLanes*LatenessStride

	// LatenessStride is the number of counters of one lane's lateness histogram.
	LatenessStride = Counter(len(LatenessBuckets)) + 2

	// CounterResultLatency is the first counter of the claim-to-result histogram (a render
	// worker observes each job when worker 0 acknowledges its result): one count per bucket of
	// ResultLatencyBuckets, one for +Inf, then the sum in µs.
	CounterResultLatency = CounterBacklog + NumLanes

	// CounterReleasedUnrendered counts leases a render worker gave back without a result, at
	// once (no grace), when it stopped: jobs it had claimed but not begun, and renders it
	// cancelled at the drain bound.
	CounterReleasedUnrendered = CounterResultLatency + Counter(len(ResultLatencyBuckets)) + 2

	// CounterChromeBlocked is the first of NumChromeBlockReasons counters: requests the chrome
	// renderer refused before they loaded, by reason (type, pattern, policy, in that order).
	CounterChromeBlocked = CounterReleasedUnrendered + 1
	// CounterChromeRestarts is the first of NumChromeRestartReasons counters: browsers the
	// chrome renderer retired for a new one, by reason (recycle, rss, crash, in that order).
	CounterChromeRestarts = CounterChromeBlocked + NumChromeBlockReasons

	// The cluster's counters (store.backend postgres; see Fence).
	// CounterGrantsFenced counts takes refused by the fence: their shard was given up, or
	// the node's leases were not renewed in time.
	CounterGrantsFenced = CounterChromeRestarts + NumChromeRestartReasons
	// CounterAdvancesFenced counts shard floor advances refused because the node no longer
	// held the shard's lease at its epoch (worker 0).
	CounterAdvancesFenced = CounterGrantsFenced + 1
	// CounterResultsFenced counts results refused because the node no longer held the row's
	// shard (worker 0).
	CounterResultsFenced = CounterAdvancesFenced + 1
	// CounterShardsOwned is a gauge: the shards the node holds (worker 0).
	CounterShardsOwned = CounterResultsFenced + 1
	// CounterShardsAcquired and CounterShardsLost count shards taken and given up (handed
	// over or found lost) by the node (worker 0).
	CounterShardsAcquired = CounterShardsOwned + 1
	CounterShardsLost     = CounterShardsAcquired + 1

	// CounterMissFlights and CounterMissWaiters are gauges: the renders on miss in flight and
	// the requests waiting for them (worker 0).
	CounterMissFlights = CounterShardsLost + 1
	CounterMissWaiters = CounterMissFlights + 1

	// CounterRenderRefusedHost counts takes refused because the row's host was paused or had
	// its limit of renders in flight (freshq_render_refused_total{cause="host"}). The row is
	// left due, unleased.
	CounterRenderRefusedHost = CounterMissWaiters + 1

	// CounterCacheEpoch is worker 0's cache epoch: an operator's rush or recache (intake's
	// Prioritize, mode rush) raises it before the rows it rushes can be claimed; each render
	// worker reads it before a render and passes it on (render.Request.CacheEpoch), and the
	// chrome renderer clears its browser's cache once when it sees one above the last it
	// cleared at. Never lowered: a render worker restarted keeps comparing against it.
	CounterCacheEpoch = CounterRenderRefusedHost + 1

	numNamedCounters = CounterCacheEpoch + 1
)

// Histogram geometry, fixed by the layout.
const (
	NumRenderOutcomes = 16 // slots; the renderer names fewer
	NumLanes          = 4

	NumChromeBlockReasons   = 3
	NumChromeRestartReasons = 3
)

// The reasons of the chrome renderer's counters, in the order of their slots: the renderer's
// names, and the label values of their metrics.
var (
	ChromeBlockReasons   = [NumChromeBlockReasons]string{"type", "pattern", "policy"}
	ChromeRestartReasons = [NumChromeRestartReasons]string{"recycle", "rss", "crash"}
)

// RenderSecondsBuckets and LatenessBuckets are the upper bounds of the histograms' buckets.
var (
	RenderSecondsBuckets = [...]float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	LatenessBuckets      = [...]float64{0.1, 0.5, 1, 1.5, 2, 3, 5, 10, 50}
	ResultLatencyBuckets = [...]float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30}
)

// Observe adds v to the histogram whose counters start at base with the given bucket bounds,
// and v×scale to its sum.
func (w *Worker) Observe(base Counter, bounds []float64, v, scale float64) {
	i := len(bounds) // +Inf
	for j, b := range bounds {
		if v <= b {
			i = j
			break
		}
	}
	w.Add(base+Counter(i), 1)
	if v > 0 {
		w.Add(base+Counter(len(bounds)+1), uint64(v*scale))
	}
}

// Worker returns worker i's block.
func (s *Segment) Worker(i int) (*Worker, error) {
	if i < 0 || i >= int(s.layout.Workers) {
		return nil, fmt.Errorf("shm: worker %d out of range 0..%d", i, s.layout.Workers-1)
	}
	base := s.layout.workers.off + uint64(i)*workerStride(s.layout.Counters)
	return &Worker{
		pid:       s.word(base),
		heartbeat: s.word(base + 8),
		beats:     s.word(base + 16),
		startedAt: s.word(base + 24),
		restarts:  s.word(base + 32),
		counters:  base + workerHeaderSize,
		seg:       s,
	}, nil
}

// Start records a new incarnation of the worker.
func (w *Worker) Start(pid int, nowMs int64) {
	atomic.StoreUint64(w.pid, uint64(pid))
	atomic.StoreUint64(w.startedAt, uint64(nowMs))
	atomic.StoreUint64(w.heartbeat, uint64(nowMs))
}

// Beat records that the worker is alive and making progress at nowMs.
func (w *Worker) Beat(nowMs int64) {
	atomic.StoreUint64(w.heartbeat, uint64(nowMs))
	atomic.AddUint64(w.beats, 1)
}

// NoteRestart counts a restart (supervisor only).
func (w *Worker) NoteRestart() { atomic.AddUint64(w.restarts, 1) }

// WorkerStatus is a snapshot of one block's header.
type WorkerStatus struct {
	PID         int
	HeartbeatMs int64
	Beats       uint64
	StartedAtMs int64
	Restarts    uint64
}

// Status reads the block's header.
func (w *Worker) Status() WorkerStatus {
	return WorkerStatus{
		PID:         int(atomic.LoadUint64(w.pid)),
		HeartbeatMs: int64(atomic.LoadUint64(w.heartbeat)),
		Beats:       atomic.LoadUint64(w.beats),
		StartedAtMs: int64(atomic.LoadUint64(w.startedAt)),
		Restarts:    atomic.LoadUint64(w.restarts),
	}
}

func (w *Worker) counter(c Counter) *uint64 {
	if uint32(c) >= w.seg.layout.Counters {
		panic(fmt.Sprintf("shm: counter %d out of range", c)) // a programming error, not input
	}
	return w.seg.word(w.counters + 8*uint64(c))
}

// Add adds d to counter c.
func (w *Worker) Add(c Counter, d uint64) { atomic.AddUint64(w.counter(c), d) }

// Set sets gauge c.
func (w *Worker) Set(c Counter, v uint64) { atomic.StoreUint64(w.counter(c), v) }

// Load reads counter c.
func (w *Worker) Load(c Counter) uint64 { return atomic.LoadUint64(w.counter(c)) }
