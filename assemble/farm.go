package assemble

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/shm"
)

// Farm builds the hosts' farm of a node of a cluster: each host's limit divided among the live
// nodes, and the refusals' pauses shared through board (the store engine's cluster capability,
// cluster.Engine). nil without a board: a node alone (Badger) holds every host's whole limit.
// The farm ticks with the cluster's membership (a quarter of cluster.lease_ttl), and its grace
// covers a render (render.timeout); tracker tells it of the pauses it sets.
func Farm(cfg *config.Config, board hosts.PauseBoard, seg *shm.Segment, tracker *hosts.Tracker, now func() time.Time, log zerolog.Logger) *hosts.Farm {
	if board == nil {
		return nil
	}
	tick := cfg.Cluster.LeaseTTL.D() / 4
	grace := hosts.FarmGrace(cfg.Render.Timeout.D(), tick)
	farm := hosts.NewFarm(hosts.FarmOptions{Seg: seg, Tracker: tracker, Board: board, Grace: grace,
		Round: hosts.FarmRound(grace), Tick: tick, Now: now, Log: log})
	tracker.OnPause = farm.Paused
	return farm
}
