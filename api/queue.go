package api

import (
	"context"
	"net/http"
	"time"

	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/crawlers"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// Queue serves /v1/queue.
type Queue struct {
	Seg *shm.Segment
	Now func() int64
	// Cluster reads the cluster view on PostgreSQL, for the node's cluster section; nil on
	// Badger, where the section is left out.
	Cluster ClusterViewFunc
	// Capacity is worker 0's capacity view, for the capacity section; nil leaves it out.
	Capacity CapacityViewFunc
	// Settings gives the hosts section each host's configured maximum (render.hosts) and the
	// freshness section the policy's name; nil: neither (every host's maximum shows as 0).
	Settings func() *intake.Settings
	// Stale is worker 0's measure of requests served stale (apply.StaleMeter), for the
	// freshness section; nil leaves it out.
	Stale *apply.StaleMeter
	// Crawlers is the crawler listener's count of what each crawler family got, for the
	// freshness section's crawlers; nil leaves them out.
	Crawlers *crawlers.Tally
}

// Register adds the endpoint to mux.
func (q *Queue) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/queue", func(w http.ResponseWriter, r *http.Request) {
		v := q.View()
		v.Cluster = q.clusterSection(r.Context())
		if v.Cluster != nil {
			v.Cluster.Farm = hosts.FarmView(q.Seg)
		}
		if q.Capacity != nil {
			c := q.Capacity()
			v.Capacity = &c
		}
		v.Freshness = q.freshness()
		ok(w, v)
	})
}

// freshness is the freshness section: the requests served stale, measured.
func (q *Queue) freshness() *wire.QueueFreshness {
	if q.Stale == nil {
		return nil
	}
	served, stale := q.Stale.Totals()
	f := &wire.QueueFreshness{ServedRequests: served, StaleRequests: stale}
	if q.Crawlers != nil {
		f.Crawlers = []wire.QueueCrawler{}
		for _, r := range q.Crawlers.Rows() {
			f.Crawlers = append(f.Crawlers, wire.QueueCrawler(r))
		}
	}
	if q.Settings != nil {
		f.Policy = q.Settings().Freshness.Policy
	}
	if served > 0 {
		f.StaleShare = stale / served
	}
	f.WindowS = apply.StaleWindow / 1000
	f.WindowServedRequests, f.WindowStaleRequests = q.Stale.Window()
	if f.WindowServedRequests > 0 {
		f.WindowStaleShare = f.WindowStaleRequests / f.WindowServedRequests
	}
	return f
}

// queueClusterTimeout bounds the read of the cluster section: the rest of /v1/queue is read
// from shared memory and answers at once.
const queueClusterTimeout = 2 * time.Second

// clusterSection is the node's shards as the database has them. A database that does not
// answer in time leaves the rest of the queue's view standing: the section then says why it
// is empty.
func (q *Queue) clusterSection(ctx context.Context) *wire.QueueCluster {
	if q.Cluster == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, queueClusterTimeout)
	defer cancel()
	v, err := q.Cluster(ctx)
	if err != nil {
		return &wire.QueueCluster{Node: v.Self, Shards: []wire.OwnedShard{}, Error: err.Error()}
	}
	return ownSection(v)
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
	v.Hosts = hosts.Rows(q.Seg, q.hostMax(), q.Now())
	v.HostsTracked, v.HostEvictions = len(v.Hosts), q.Seg.Hosts().Stats().Evictions
	return v
}

// hostMax is each host's configured maximum of renders in flight, at the policy in force.
func (q *Queue) hostMax() func(host []byte) int {
	if q.Settings == nil {
		return func([]byte) int { return 0 }
	}
	return q.Settings().Hosts.Max
}
