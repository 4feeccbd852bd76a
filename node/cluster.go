package node

import (
	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/internal/grantlog"
	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/shm"
	"github.com/rs/zerolog"
)

// Cluster builds worker 0's part in a cluster of nodes on the capability the store's engine
// offers (cluster.Engine; nil on Badger, where every function returns nil). A worker runs
// EngineCluster's; a test may put its own in to watch the order the parts start and stop in.
type Cluster struct {
	// Services are the node's membership (it takes the node's shards and publishes capacity's
	// figures) and the hosts' farm (each host's limit shared among the live nodes; tracker tells
	// it of the pauses it sets). It also makes capacity count the shards the node holds.
	Services func(cfg *config.Config, eng cluster.Engine, gl *grantlog.Log, tracker *hosts.Tracker, capacity *capacity.Service) (member, farm startstop.Service)
	// MissWatch wakes the node's render-on-miss waiters on another node's commit.
	MissWatch func(eng cluster.Engine, misses *misses.Flights) startstop.Service
	// View reads the cluster for /v1/cluster and /v1/queue; nil on Badger.
	View func(eng cluster.Engine, cfg *config.Config, boost func() float64) api.ClusterViewFunc
}

// EngineCluster is the cluster's parts as a worker runs them, on its segment and its block.
func EngineCluster(seg *shm.Segment, worker *shm.Worker, log zerolog.Logger) Cluster {
	return Cluster{
		Services: func(cfg *config.Config, eng cluster.Engine, gl *grantlog.Log, tracker *hosts.Tracker, svc *capacity.Service) (startstop.Service, startstop.Service) {
			farm := assemble.Farm(cfg, eng, seg, tracker, clock.Now, log)
			svc.InCluster(eng)
			member := cluster.NewNodeMember(eng, cluster.NodeOptions{ID: cfg.NodeID(), Addr: cfg.Listen, TTL: cfg.Cluster.LeaseTTL.D(),
				Seg: seg, Worker: worker, Now: clock.Now, Log: log, Event: gl.Event, Members: farm.Members,
				Figures: svc.FiguresJSON, Recount: svc.Nudge})
			// An absent part is a nil Service, not a Service holding a nil pointer.
			var m, f startstop.Service
			if member != nil {
				m = member
				if farm != nil {
					farm.OnMembersBehind(member.Nudge) // a node joined: read the cluster now
				}
			}
			if farm != nil {
				f = farm
			}
			return m, f
		},
		MissWatch: func(eng cluster.Engine, misses *misses.Flights) startstop.Service {
			if w := cluster.NewMissWatch(eng, misses); w != nil {
				return w
			}
			return nil
		},
		View: func(eng cluster.Engine, cfg *config.Config, boost func() float64) api.ClusterViewFunc {
			return cluster.StatusView(eng, cfg.NodeID(), cfg.Cluster.LeaseTTL.D(), capacity.FarmOf(boost))
		},
	}
}
