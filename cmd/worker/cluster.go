package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/internal/grantlog"
	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
)

// openGrantLog opens the cluster's grant log, a test switch (internal/grantlog): nil, and no
// cost, unless this is a test build (tag testclock) and FRESHQ_TEST_GRANT_LOG is set.
func openGrantLog(e *env, cfg *config.Config) *grantlog.Log {
	gl, err := grantlog.Open(cfg.NodeID(), cfg.Store.Postgres.Shards)
	if err != nil {
		e.log.Error().Err(err).Msg("grant log")
	}
	return gl
}

// grantHook is the claim path's Granted hook for gl: nil when there is no log.
func grantHook(gl *grantlog.Log) func([]byte, int64) {
	if gl == nil {
		return nil
	}
	return gl.Grant
}

// newMember builds worker 0's part in the cluster when the store is PostgreSQL: nil on Badger,
// whose node alone owns everything (and grants with no fence: grantUntil 0). farm, when not
// nil, is told of the membership at every tick; capacity's figures go with every heartbeat.
func newMember(e *env, cfg *config.Config, st store.Store, gl *grantlog.Log, farm *hosts.Farm, capacity *capacity.Service) *cluster.Member {
	pg, ok := st.(*pgstore.Store)
	if !ok {
		e.seg.Fence().SetGrantUntil(0)
		return nil
	}
	l := e.seg.Layout()
	host, _ := os.Hostname()
	opts := cluster.Options{
		Registry:    pg,
		ID:          cfg.NodeID(),
		Addr:        cfg.Listen,
		Incarnation: fmt.Sprintf("%s/%d/%d", host, l.CreatorPID, l.EpochMs),
		TTL:         cfg.Cluster.LeaseTTL.D(),
		Shards:      pg.Shards(),
		Owned:       pg.SetOwned,
		Fence:       e.seg.Fence(),
		Leases:      e.seg.Leases(),
		Worker:      e.worker,
		Now:         clock.Now,
		Log:         e.log,
	}
	if gl != nil {
		opts.Event = gl.Event
	}
	if farm != nil {
		opts.Members = farm.Members
	}
	publishCapacity(&opts, capacity)
	return cluster.NewMember(opts)
}

// newFarm builds the hosts' farm of a node on PostgreSQL: each host's limit divided among the
// live nodes, and the refusals' pauses shared through the database. nil on Badger, whose node
// holds every host's whole limit. The Tracker tells it of the pauses it sets.
func newFarm(e *env, cfg *config.Config, st store.Store, tracker *hosts.Tracker) *hosts.Farm {
	pg, ok := st.(*pgstore.Store)
	if !ok {
		return nil
	}
	tick := cfg.Cluster.LeaseTTL.D() / 4
	grace := hosts.FarmGrace(cfg.Render.Timeout.D(), tick)
	farm := hosts.NewFarm(hosts.FarmOptions{Seg: e.seg, Tracker: tracker, Board: pg, Grace: grace,
		Round: hosts.FarmRound(grace), Tick: tick, Now: clock.Now, Log: e.log})
	tracker.OnPause = farm.Paused
	return farm
}

// farmService adapts a possibly nil *hosts.Farm to Start/Stop.
type farmService struct{ f *hosts.Farm }

func (s farmService) Start(ctx context.Context) error {
	if s.f == nil {
		return nil
	}
	return s.f.Start(ctx)
}

func (s farmService) Stop() {
	if s.f != nil {
		s.f.Stop()
	}
}

// pgFenced counts what a cluster's fence refused in worker 0's counters.
func pgFenced(w *shm.Worker) func(pgstore.Fenced, int) {
	return func(what pgstore.Fenced, n int) {
		switch what {
		case pgstore.FencedAdvance:
			w.Add(shm.CounterAdvancesFenced, uint64(n))
		case pgstore.FencedResult:
			w.Add(shm.CounterResultsFenced, uint64(n))
		}
	}
}

// memberService adapts a possibly nil *cluster.Member to Start/Stop.
type memberService struct{ m *cluster.Member }

func (s memberService) Start(ctx context.Context) error {
	if s.m == nil {
		return nil
	}
	return s.m.Start(ctx)
}

func (s memberService) Stop() {
	if s.m != nil {
		s.m.Stop()
	}
}

// missWatchPeriod is how often a node of a cluster asks the database whether a page its
// waiters wait for was committed by another node: a waiter is answered within it of the
// commit (plus the read).
const missWatchPeriod = 250 * time.Millisecond

// missWatch wakes the node's render-on-miss waiters when another node of the cluster commits
// their page (misses.Flights.Watch); a no-op on Badger, whose worker 0 applies every result.
type missWatch struct {
	startstop.BaseStartStop
	misses  *misses.Flights
	present func(ctx context.Context, keys [][]byte) ([][]byte, error) // nil on Badger
}

func newMissWatch(st store.Store, misses *misses.Flights) *missWatch {
	w := &missWatch{misses: misses}
	if pg, ok := st.(*pgstore.Store); ok {
		w.present = pg.PagesPresent
	}
	return w
}

func (w *missWatch) Start(ctx context.Context) error {
	if w.present == nil {
		return nil
	}
	ctx, start, done := w.StartInit(ctx)
	if !start {
		return nil
	}
	go func() {
		defer done()
		w.misses.Watch(ctx, missWatchPeriod, w.present)
	}()
	return nil
}
