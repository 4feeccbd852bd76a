package hosts

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/shm"
)

// Farm is worker 0's half of the farm: it keeps the node's membership in the segment's farm
// words (Members, called at each cluster tick), and exchanges refusals' pauses with the other
// nodes through a PauseBoard (a service: Start, Stop), so that a pause one node sees holds
// every node back within a tick. Build it with NewFarm.
type Farm struct {
	startstop.BaseStartStop
	opts FarmOptions

	mu      sync.Mutex
	pending map[string]boardPause // pauses seen here, not yet on the board
	nudge   chan struct{}
}

// FarmOptions wires a Farm.
type FarmOptions struct {
	Seg     *shm.Segment
	Tracker *Tracker   // adopts the other nodes' pauses into the host table
	Board   PauseBoard // the cluster's pauses (store/pgstore/pgcluster)
	// Grace is how long a share that grew waits: longer than a render lasts plus a tick, plus
	// the clocks' margin (FarmGrace). Round is the period a remainder rotates at (FarmRound).
	Grace, Round time.Duration
	// Tick is the period the board is read at (the cluster's tick): the bound on how late a
	// pause reaches this node.
	Tick time.Duration
	Now  func() time.Time
	Log  zerolog.Logger
}

// PauseBoard is the cluster's record of pauses, on its clock (ms): store/pgstore/pgcluster keeps it in
// the database.
type PauseBoard interface {
	// PublishPauses records that each host is paused until untilMs (answered with status); a
	// host already paused later keeps its later pause.
	PublishPauses(ctx context.Context, hosts []string, untilMs []int64, status []int32) error
	// ReadPauses returns every pause that has not ended, and the cluster's clock now.
	ReadPauses(ctx context.Context) (hosts []string, untilMs []int64, status []int32, nowMs int64, err error)
}

type boardPause struct {
	untilMs int64 // this node's clock
	status  int32
}

// FarmGrace is the grace for renders that last at most renderTimeout on a cluster that ticks
// every tick: a render granted under the division before a change ends within renderTimeout,
// every node has seen the change within a tick, and a second covers the clocks' disagreement
// after each corrected its own by the database's.
func FarmGrace(renderTimeout, tick time.Duration) time.Duration {
	return renderTimeout + tick + time.Second
}

// FarmRound is the period at which a remainder rotates: four graces, so that at most one
// round begins within any grace, and a share that moves idles at most a quarter of a round.
func FarmRound(grace time.Duration) time.Duration { return 4 * grace }

// NewFarm returns a Farm. Every option is required. Until its first Members, a segment that
// had no membership holds no share of any host (a restarted worker 0 finds the one its
// predecessor wrote, and keeps it).
func NewFarm(opts FarmOptions) *Farm {
	if MembershipOf(opts.Seg).Nodes == 0 {
		setMembership(opts.Seg, Membership{Nodes: FarmNone, PrevNodes: FarmNone})
	}
	return &Farm{opts: opts, pending: map[string]boardPause{}, nudge: make(chan struct{}, 1)}
}

// Members records the node's membership at a cluster tick: live are the live nodes' ids (me
// among them unless it is stopping), clusterNow the database's clock when it read them. A
// node that joins a farm of others holds no share of any host for a grace, and neither does
// one whose membership changed twice within a grace; a node alone at its first tick holds
// every host's whole limit at once (no other node can have seen itself alone then too: each
// registers before it reads the nodes).
func (f *Farm) Members(me string, live []string, clusterNow time.Time) {
	o := f.opts
	now := o.Now().UnixMilli()
	sorted := slices.Sorted(slices.Values(live))
	index, nodes := uint16(0), uint16(FarmNone)
	if i := slices.Index(sorted, me); i >= 0 && len(sorted) < FarmNone {
		index, nodes = uint16(i), uint16(len(sorted))
	}
	cur := MembershipOf(o.Seg)
	next := cur
	next.GraceMs, next.RoundMs = o.Grace.Milliseconds(), max(o.Round.Milliseconds(), 1)
	next.ClockOffsetMs = clusterNow.UnixMilli() - now
	switch {
	case cur.SinceMs == 0: // this segment's first membership
		next.Index, next.Nodes, next.SinceMs = index, nodes, now
		next.PrevIndex, next.PrevNodes = 0, FarmNone
		if nodes == 1 {
			next.PrevNodes = 1
		}
	case index != cur.Index || nodes != cur.Nodes:
		next.PrevIndex, next.PrevNodes = cur.Index, cur.Nodes
		if now-cur.SinceMs < next.GraceMs { // the last change is still in its grace
			next.PrevIndex, next.PrevNodes = 0, FarmNone
		}
		next.Index, next.Nodes, next.SinceMs = index, nodes, now
		o.Log.Info().Int("index", int(index)).Int("nodes", int(nodes)).Int("was_index", int(cur.Index)).
			Int("was_nodes", int(cur.Nodes)).Msg("farm: the division of the hosts' limits changed")
	}
	if next != cur {
		setMembership(o.Seg, next)
	}
}

// Paused is told of a pause this node's Tracker set (Tracker.OnPause): it goes on the board at
// once, not at the next tick.
func (f *Farm) Paused(host string, untilMs int64, status int) {
	f.mu.Lock()
	if p, ok := f.pending[host]; !ok || untilMs > p.untilMs {
		f.pending[host] = boardPause{untilMs: untilMs, status: int32(status)}
	}
	f.mu.Unlock()
	select {
	case f.nudge <- struct{}{}:
	default:
	}
}

// Start runs the exchange until Stop: what this node saw goes on the board as soon as it is
// seen, and the board is read every tick.
func (f *Farm) Start(ctx context.Context) error {
	ctx, start, done := f.StartInit(ctx)
	if !start {
		return nil
	}
	go func() {
		defer done()
		t := time.NewTicker(f.opts.Tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-f.nudge:
				f.publish(ctx)
			case <-t.C:
				f.Exchange(ctx)
			}
		}
	}()
	return nil
}

// Exchange is one round: publish what this node saw, then adopt every pause on the board.
func (f *Farm) Exchange(ctx context.Context) {
	f.publish(ctx)
	o := f.opts
	hosts, until, status, _, err := o.Board.ReadPauses(ctx)
	if err != nil {
		o.Log.Warn().Err(err).Msg("farm: reading the cluster's pauses failed")
		return
	}
	offset := MembershipOf(o.Seg).ClockOffsetMs
	now := o.Now().UnixMilli()
	for i, h := range hosts {
		o.Tracker.Adopt(h, until[i]-offset, int(status[i]), now)
	}
}

func (f *Farm) publish(ctx context.Context) {
	f.mu.Lock()
	pending := f.pending
	f.pending = map[string]boardPause{}
	f.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	o := f.opts
	offset := MembershipOf(o.Seg).ClockOffsetMs
	hosts := make([]string, 0, len(pending))
	until := make([]int64, 0, len(pending))
	status := make([]int32, 0, len(pending))
	for h, p := range pending {
		hosts, until, status = append(hosts, h), append(until, p.untilMs+offset), append(status, p.status)
	}
	if err := o.Board.PublishPauses(ctx, hosts, until, status); err != nil {
		o.Log.Warn().Err(err).Int("hosts", len(hosts)).Msg("farm: publishing pauses failed; the other nodes learn of them at the next")
		f.mu.Lock()
		for h, p := range pending {
			if q, ok := f.pending[h]; !ok || p.untilMs > q.untilMs {
				f.pending[h] = p
			}
		}
		f.mu.Unlock()
	}
}
