package shmmetrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// The politeness series, read from shared memory at the scrape (package hosts): the host
// table and the host tokens in the lease table, there while worker 0 restarts. A host label
// would be unbounded — a farm renders for as many hosts as its targets name — so the per-host
// series cover only hosts the table holds, and at most HostSeriesMax of them each.
var (
	descHostPaused   = prometheus.NewDesc("freshq_host_paused", "1 for each host paused now by a Retry-After (the longest pauses, at most 20 hosts).", []string{"host"}, nil)
	descHostInflight = prometheus.NewDesc("freshq_host_inflight", "Renders in flight of each host the host table holds (the 20 with the most).", []string{"host"}, nil)
	descRenderRefuse = prometheus.NewDesc("freshq_render_refused_total", "Takes refused, the row left due, by cause: host = its host was paused or at its limit of renders in flight.", []string{"cause"}, nil)
	descHostsTracked = prometheus.NewDesc("freshq_hosts_tracked", "Hosts the host table holds: paused, or limited below their maximum.", nil, nil)

	hostDescriptions = []*prometheus.Desc{descHostPaused, descHostInflight, descRenderRefuse, descHostsTracked}
)

// HostSeriesMax bounds each per-host series' hosts at a scrape.
const HostSeriesMax = 20

// collectHosts exports the politeness series at nowMs.
func (c *Collector) collectHosts(e emit, nowMs int64) {
	e.counter(descRenderRefuse, e.sum(shm.CounterRenderRefusedHost), "host")
	// The table is kept per site, and so are the limits (overrides folded into their sites).
	lim := c.o.HostLimits()
	rows := hosts.Rows(c.o.Segment, lim.Max, nowMs)
	e.gauge(descHostsTracked, float64(len(rows)))
	for _, r := range topPaused(rows) {
		e.gauge(descHostPaused, 1, r.Host)
	}
	for _, r := range topInFlight(rows) {
		e.gauge(descHostInflight, float64(r.InFlight), r.Host)
	}
}

// topPaused is the paused hosts of rows (sorted by hosts.Compare: the paused first, the
// longest pause first), at most HostSeriesMax.
func topPaused(rows []wire.QueueHost) []wire.QueueHost {
	n := 0
	for n < len(rows) && n < HostSeriesMax && rows[n].Paused {
		n++
	}
	return rows[:n]
}

// topInFlight is the HostSeriesMax hosts of rows with the most renders in flight (ties: the
// most held back first), on a copy.
func topInFlight(rows []wire.QueueHost) []wire.QueueHost {
	by := slices.Clone(rows)
	slices.SortStableFunc(by, func(a, b wire.QueueHost) int { return b.InFlight - a.InFlight })
	return by[:min(len(by), HostSeriesMax)]
}
