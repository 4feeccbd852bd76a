package shmmetrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/freshq/freshq/shm"
)

// ClusterScrapeTimeout bounds the read of worker 0's cluster view at a scrape: a database that
// does not answer leaves the shard series out of this scrape, not /metrics hanging.
const ClusterScrapeTimeout = time.Second

// collectCluster exports the cluster's series on PostgreSQL (nothing on Badger, whose node is in
// no cluster). The fence's refusals and the number of shards held are worker 0's and the render
// workers' counters in shared memory, there while worker 0 restarts. Each shard's epoch, floor
// and rows below it live only in the database: they are read from worker 0's cluster view at
// the scrape, for the leases the node holds unexpired, and left out of a scrape during which
// worker 0 or the database does not answer (a missing series is honest, a stale one is not).
func (c *Collector) collectCluster(e emit, w0 *shm.Worker) {
	if !c.o.Clustered() {
		return
	}
	e.counter(descGrantsFenced, e.sum(shm.CounterGrantsFenced))
	e.counter(descAdvancesFenced, float64(w0.Load(shm.CounterAdvancesFenced)))
	e.counter(descResultsFenced, float64(w0.Load(shm.CounterResultsFenced)))
	e.gauge(descShardsOwned, float64(w0.Load(shm.CounterShardsOwned)))
	e.counter(descShardsMoved, float64(w0.Load(shm.CounterShardsAcquired)), "acquired")
	e.counter(descShardsMoved, float64(w0.Load(shm.CounterShardsLost)), "lost")
	ctx, cancel := context.WithTimeout(context.Background(), ClusterScrapeTimeout)
	defer cancel()
	v, err := c.o.Worker0.Cluster(ctx)
	if err != nil {
		return
	}
	for _, sh := range v.Shards {
		if sh.Owner != v.Self || sh.ExpiresAtMs <= v.NowMs {
			continue
		}
		label := strconv.Itoa(sh.Shard)
		e.gauge(descShardEpoch, float64(sh.Epoch), label)
		e.gauge(descShardFloor, float64(sh.FloorMs)/1000, label)
		e.gauge(descShardBelow, float64(sh.RowsBelowFloor), label)
	}
}

// The capacity series: worker 0's demand, measured capacity and projection (package capacity).
var (
	descDemand    = prometheus.NewDesc("freshq_demand_renders_per_second", "Renders per second the schedule asks for (Σ 1/cadence over live rows), by lane.", []string{"lane"}, nil)
	descCapacity  = prometheus.NewDesc("freshq_capacity_renders_per_second", "Renders completed per second, smoothed over 15 minutes.", nil, nil)
	descProjected = prometheus.NewDesc("freshq_projected_lateness_ratio", "Projected steady-state age ÷ cadence at render, by lane (1 = on time).", []string{"lane"}, nil)

	capacityDescriptions = []*prometheus.Desc{descDemand, descCapacity, descProjected}
)

// CapacityScrapeTimeout bounds the read of worker 0's capacity view at a scrape.
const CapacityScrapeTimeout = time.Second

// collectCapacity exports the capacity series from worker 0's capacity view, read over the
// control socket at the scrape. A worker 0 that does not answer leaves them out of this scrape
// (a missing series is honest, a stale one is not).
func (c *Collector) collectCapacity(e emit) {
	ctx, cancel := context.WithTimeout(context.Background(), CapacityScrapeTimeout)
	defer cancel()
	v, err := c.o.Worker0.Capacity(ctx)
	if err != nil {
		return
	}
	for _, lane := range Lanes {
		e.gauge(descDemand, v.Demand.ByLane[lane], lane)
		if r, ok := v.Projection.ByLane[lane]; ok {
			e.gauge(descProjected, r, lane)
		}
	}
	e.gauge(descCapacity, v.Capacity.PerSecond)
}
