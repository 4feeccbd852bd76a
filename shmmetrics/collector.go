package shmmetrics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// Worker0 is what the collector reads from worker 0 at a scrape, over its control socket
// (*wire.Client).
type Worker0 interface {
	Cluster(ctx context.Context) (wire.ClusterView, error)
	Capacity(ctx context.Context) (wire.Capacity, error)
}

// Options are the collector's dependencies.
type Options struct {
	Segment *shm.Segment
	// Workers is the number of worker blocks summed at a scrape: the pool's size.
	Workers int
	// Clustered reports whether the node is in a cluster (store.backend postgres): only then are
	// the cluster's series exported.
	Clustered func() bool
	// HostLimits are the host limits in force (render.hosts, folded by site).
	HostLimits func() hosts.Limits
	Worker0    Worker0
}

// ErrMissing is returned by New when a dependency is missing.
var ErrMissing = errors.New("shmmetrics: missing dependency")

// Collector turns the segment's counters into the metrics docs/METRICS.md lists, at each
// scrape.
type Collector struct{ o Options }

// New is the collector over o.Segment.
func New(o Options) (*Collector, error) {
	switch {
	case o.Segment == nil:
		return nil, fmt.Errorf("%w: Segment", ErrMissing)
	case o.Workers < 1:
		return nil, fmt.Errorf("%w: Workers", ErrMissing)
	case o.Clustered == nil:
		return nil, fmt.Errorf("%w: Clustered", ErrMissing)
	case o.HostLimits == nil:
		return nil, fmt.Errorf("%w: HostLimits", ErrMissing)
	case o.Worker0 == nil:
		return nil, fmt.Errorf("%w: Worker0", ErrMissing)
	}
	return &Collector{o: o}, nil
}

// Lanes are the queue's lanes, as the lane label names them.
var Lanes = []string{"urgent", "submitted", "discovered", "cold"}

var (
	descClaim     = prometheus.NewDesc("freshq_claim_granted_total", "Jobs granted, by where they came from.", []string{"source"}, nil)
	descSweep     = prometheus.NewDesc("freshq_ready_sweep_seconds", "Duration of the last sweep, and sweeps by outcome.", []string{"outcome"}, nil)
	descSweeps    = prometheus.NewDesc("freshq_ready_sweeps_total", "Sweeps by outcome.", []string{"outcome"}, nil)
	descPublished = prometheus.NewDesc("freshq_ready_published", "Entries in the active ready-set generation.", nil, nil)
	descReadyGen  = prometheus.NewDesc("freshq_ready_generation", "The active ready-set generation (0 = cold).", nil, nil)
	descCadence   = prometheus.NewDesc("freshq_ready_cadence_total", "Rows scored, by where their cadence came from.", []string{"origin"}, nil)
	descBacklog   = prometheus.NewDesc("freshq_backlog", "Due rows at the last sweep, by lane.", []string{"lane"}, nil)
	descLateness  = prometheus.NewDesc("freshq_lateness_ratio", "Lateness ratio (now - due) / cadence at grant, by lane.", []string{"lane"}, nil)
	descRender    = prometheus.NewDesc("freshq_render_total", "Render attempts by outcome.", []string{"outcome"}, nil)
	descRenderSec = prometheus.NewDesc("freshq_render_seconds", "Render duration.", nil, nil)
	descRefused   = prometheus.NewDesc("freshq_lease_refused_total", "Takes refused at grant time because the row was leased, by cause.", []string{"cause"}, nil)
	descLeases    = prometheus.NewDesc("freshq_leases_live", "Live leases of rows (host slots are not counted).", nil, nil)
	// A timestamp in seconds, as Prometheus names them (promtool rejects an abbreviated unit such
	// as freshq_floor_ms).
	descFloor       = prometheus.NewDesc("freshq_floor_timestamp_seconds", "The claim floor, seconds since the epoch.", nil, nil)
	descPinned      = prometheus.NewDesc("freshq_floor_pinned_seconds", "How long the row at the floor's head has held it.", nil, nil)
	descBelow       = prometheus.NewDesc("freshq_below_floor", "Rows below the claim floor (must be 0).", nil, nil)
	descRestarts    = prometheus.NewDesc("freshq_worker_restarts_total", "Worker restarts.", []string{"worker"}, nil)
	descDropped     = prometheus.NewDesc("freshq_results_dropped_total", "Results given up after the delivery bound.", nil, nil)
	descGivenBack   = prometheus.NewDesc("freshq_leases_released_unrendered_total", "Leases a render worker gave back without a result when it stopped: claimed but not begun, or cancelled at the drain bound.", nil, nil)
	descResultLat   = prometheus.NewDesc("freshq_claim_to_result_seconds", "From claim to worker 0's commit of the result.", nil, nil)
	descChromeBlock = prometheus.NewDesc("freshq_chrome_blocked_requests_total", "Requests the chrome renderer refused before they loaded: by resource type, by URL pattern, or by policy (render.domains, the address policy, a scheme other than http(s)).", []string{"reason"}, nil)
	descChromeRest  = prometheus.NewDesc("freshq_chrome_restarts_total", "Browsers the chrome renderer retired for a new one: after render.chrome.recycle_after renders, over render.chrome.max_rss, or crashed.", []string{"reason"}, nil)
	descHeartbeat   = prometheus.NewDesc("freshq_worker_heartbeat_age_seconds", "Seconds since each worker's last heartbeat.", []string{"worker"}, nil)
	// The cluster (store.backend postgres): what the fence refused, counted in shared memory,
	// and this node's shards, the number from worker 0's block and each one from its cluster view.
	descGrantsFenced   = prometheus.NewDesc("freshq_grants_fenced_total", "Takes refused by the node's fence: their shard was given up, or its leases were not renewed in time.", nil, nil)
	descAdvancesFenced = prometheus.NewDesc("freshq_floor_advances_fenced_total", "Shard floor advances refused because the node no longer held the shard at its epoch.", nil, nil)
	descResultsFenced  = prometheus.NewDesc("freshq_results_fenced_total", "Results refused because the node no longer held the row's shard.", nil, nil)
	descShardsOwned    = prometheus.NewDesc("freshq_cluster_shards_owned", "Shards this node holds by lease.", nil, nil)
	descShardsMoved    = prometheus.NewDesc("freshq_cluster_shard_moves_total", "Shards this node acquired, and gave up (handed over or found lost).", []string{"direction"}, nil)
	descShardEpoch     = prometheus.NewDesc("freshq_shard_epoch", "The epoch of this node's lease of each shard it holds.", []string{"shard"}, nil)
	descShardFloor     = prometheus.NewDesc("freshq_shard_floor_timestamp_seconds", "The floor of each shard this node holds, seconds since the epoch.", []string{"shard"}, nil)
	descShardBelow     = prometheus.NewDesc("freshq_shard_rows_below_floor", "Rows due below the floor of each shard this node holds (must be 0; counted up to 1000 a shard).", []string{"shard"}, nil)
	allDescriptions    = []*prometheus.Desc{descClaim, descSweep, descSweeps, descPublished, descReadyGen, descCadence, descBacklog,
		descLateness, descRender, descRenderSec, descRefused, descLeases, descFloor, descPinned, descBelow, descRestarts,
		descDropped, descGivenBack, descHeartbeat, descResultLat, descChromeBlock, descChromeRest,
		descGrantsFenced, descAdvancesFenced, descResultsFenced, descShardsOwned, descShardsMoved, descShardEpoch, descShardFloor, descShardBelow}
)

// Describe sends every series' description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescriptions {
		ch <- d
	}
	for _, d := range capacityDescriptions {
		ch <- d
	}
	for _, d := range missDescriptions {
		ch <- d
	}
	for _, d := range hostDescriptions {
		ch <- d
	}
}

// emit is one scrape's output: the workers' blocks and the helpers that send a series.
type emit struct {
	ch      chan<- prometheus.Metric
	workers []*shm.Worker
}

// sum is ctr summed over every worker's block.
func (e emit) sum(ctr shm.Counter) float64 {
	t := uint64(0)
	for _, w := range e.workers {
		t += w.Load(ctr)
	}
	return float64(t)
}

func (e emit) counter(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func (e emit) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// histogram exports the histogram at base: a count per bound, then +Inf, then the sum (in
// units of 1/scale), each summed over every worker.
func (e emit) histogram(d *prometheus.Desc, base shm.Counter, bounds []float64, scale float64, labels ...string) {
	buckets := make(map[float64]uint64, len(bounds))
	cum := uint64(0)
	for i, b := range bounds {
		cum += uint64(e.sum(base + shm.Counter(i)))
		buckets[b] = cum
	}
	count := cum + uint64(e.sum(base+shm.Counter(len(bounds))))
	total := e.sum(base+shm.Counter(len(bounds)+1)) / scale
	e.ch <- prometheus.MustNewConstHistogram(d, count, total, buckets, labels...)
}

// Collect exports every series at the clock's now (clock.Now, which tests move).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	seg := c.o.Segment
	now := clock.Now()
	e := emit{ch: ch, workers: make([]*shm.Worker, c.o.Workers)}
	for i := range e.workers {
		e.workers[i], _ = seg.Worker(i)
	}
	w0 := e.workers[0]
	c.collectQueue(e, w0, now)
	for i, w := range e.workers {
		st := w.Status()
		idx := strconv.Itoa(i)
		e.counter(descRestarts, float64(st.Restarts), idx)
		age := 0.0
		if st.HeartbeatMs > 0 {
			age = now.Sub(time.UnixMilli(st.HeartbeatMs)).Seconds()
		}
		e.gauge(descHeartbeat, age, idx)
	}
	c.collectCluster(e, w0)
	c.collectCapacity(e)
	e.gauge(descMissFlights, float64(w0.Load(shm.CounterMissFlights)))
	e.gauge(descMissWaiters, float64(w0.Load(shm.CounterMissWaiters)))
	c.collectHosts(e, now.UnixMilli())
}

// collectQueue exports the queue's series: claims, sweeps, the ready buffer, lanes, renders,
// leases and the floor.
func (c *Collector) collectQueue(e emit, w0 *shm.Worker, now time.Time) {
	seg := c.o.Segment
	e.counter(descClaim, e.sum(shm.CounterClaimReady), "ready")
	e.counter(descClaim, e.sum(shm.CounterClaimIndex), "index")
	e.gauge(descSweep, float64(w0.Load(shm.CounterSweepMicros))/1e6, "last")
	e.counter(descSweeps, float64(w0.Load(shm.CounterSweeps)), "ok")
	e.counter(descSweeps, float64(w0.Load(shm.CounterSweepFailures)), "failed")
	e.counter(descSweeps, float64(w0.Load(shm.CounterSweepCapped)), "capped")
	rs := seg.Ready().Stats()
	e.gauge(descPublished, float64(rs.Count))
	e.gauge(descReadyGen, float64(rs.Gen))
	e.counter(descCadence, float64(w0.Load(shm.CounterCadenceCarried)), "carried")
	e.counter(descCadence, float64(w0.Load(shm.CounterCadenceResolved)), "resolved")
	for lane, name := range Lanes {
		e.gauge(descBacklog, float64(w0.Load(shm.CounterBacklog+shm.Counter(lane))), name)
		e.histogram(descLateness, shm.CounterLateness+shm.Counter(lane)*shm.LatenessStride, shm.LatenessBuckets[:], 1e6, name)
	}
	for i, o := range outcome.All() {
		e.counter(descRender, e.sum(shm.CounterRenderOutcome+shm.Counter(i)), o.String())
	}
	e.histogram(descRenderSec, shm.CounterRenderSeconds, shm.RenderSecondsBuckets[:], 1e6)
	e.histogram(descResultLat, shm.CounterResultLatency, shm.ResultLatencyBuckets[:], 1e6)
	ls := seg.Leases().Stats(now.UnixMilli())
	e.counter(descRefused, float64(ls.RefusedHeld), "held")
	e.counter(descRefused, float64(ls.RefusedFull), "full")
	e.counter(descRefused, float64(ls.RefusedContended), "contended")
	e.gauge(descLeases, float64(ls.Live))
	floor := seg.Floor().Load()
	e.gauge(descFloor, float64(floor)/1000)
	pinned := 0.0
	if h, since := seg.Floor().Pin(); h != 0 && since > 0 {
		pinned = now.Sub(time.UnixMilli(since)).Seconds()
	}
	e.gauge(descPinned, pinned)
	e.gauge(descBelow, float64(w0.Load(shm.CounterBelowFloor)))
	e.counter(descDropped, e.sum(shm.CounterResultsDropped))
	e.counter(descGivenBack, e.sum(shm.CounterReleasedUnrendered))
	for i, reason := range shm.ChromeBlockReasons {
		e.counter(descChromeBlock, e.sum(shm.CounterChromeBlocked+shm.Counter(i)), reason)
	}
	for i, reason := range shm.ChromeRestartReasons {
		e.counter(descChromeRest, e.sum(shm.CounterChromeRestarts+shm.Counter(i)), reason)
	}
}

// Render on miss (POST /v1/pages?wait=, the crawler listener's misses), from worker 0's block.
var (
	descMissFlights  = prometheus.NewDesc("freshq_render_on_miss_flights", "Renders on miss in flight: one per page that requests wait for.", nil, nil)
	descMissWaiters  = prometheus.NewDesc("freshq_render_on_miss_waiters", "Requests waiting for a render on miss (at most page.max_waiters).", nil, nil)
	missDescriptions = []*prometheus.Desc{descMissFlights, descMissWaiters}
)
