package assemble

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/shm"
)

// FarmBoard is what a farm asks of the store engine's cluster capability (cluster.Engine): the
// refusals' pauses and the nodes' confirmations of each division, shared through the database.
type FarmBoard interface {
	hosts.PauseBoard
	hosts.ConfirmBoard
}

// Farm builds the hosts' farm of a node of a cluster: each host's limit divided among the live
// nodes, each division confirmed and the refusals' pauses shared through board. nil without a
// board: a node alone (Badger) holds every host's whole limit. The farm ticks with the
// cluster's membership (a quarter of cluster.lease_ttl); a share grows once every live node
// confirmed the division, and the grace (render.timeout and a tick) bounds only what a node
// that cannot confirm holds; tracker tells it of the pauses it sets.
func Farm(cfg *config.Config, board FarmBoard, seg *shm.Segment, tracker *hosts.Tracker, now func() time.Time, log zerolog.Logger) *hosts.Farm {
	if board == nil {
		return nil
	}
	tick := cfg.Cluster.LeaseTTL.D() / 4
	limits := HostsLimits(cfg.Render.Hosts, cfg.Render.Domains...)
	grace := hosts.FarmGrace(cfg.Render.Timeout.D(), tick)
	farm := hosts.NewFarm(hosts.FarmOptions{Seg: seg, Tracker: tracker, Board: board, Confirms: board, Grace: grace,
		Round: hosts.FarmConfirmedRound(tick), Tick: tick, LeaseTTL: cfg.Cluster.LeaseTTL.D(), Max: limits.Max, Now: now, Log: log})
	tracker.OnPause = farm.Paused
	return farm
}
