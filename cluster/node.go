package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/shm"
)

// NodeOptions are what a node's Member is built with beside its Engine (NewNodeMember).
type NodeOptions struct {
	ID   string        // node.id
	Addr string        // the node's listen address, for operators
	TTL  time.Duration // cluster.lease_ttl
	// Seg is the node's segment: its fence, lease table and layout (the incarnation).
	Seg    *shm.Segment
	Worker *shm.Worker // worker 0's block
	Now    func() time.Time
	Log    zerolog.Logger
	// Event, when set, is told of every acquire, release and loss (the grant log, a test
	// switch); nil in production.
	Event func(kind string, shard int32, epoch int64)
	// Members, when set, is told of the membership at every tick (hosts.Farm.Members).
	Members func(me string, live []string, clusterNow time.Time)
	// Figures, when set, is the node's capacity figures (capacity.Service.FiguresJSON),
	// published with every heartbeat; Recount, when set, is asked for a recount when the
	// shards the node holds change (capacity.Service.Nudge), so that a shard taken over is
	// counted within capacity.NudgeDelay, not at the next periodic recount.
	Figures func() []byte
	Recount func()
}

// Retick is the part of cluster.lease_ttl a node's member waits before it ticks again while
// the membership moves (Options.Retick): 500 ms at the default TTL of 10 s.
const Retick = 20

// NewNodeMember builds worker 0's part in the cluster on eng: nil when eng is nil (the
// embedded store), whose node alone owns everything and grants with no fence (grantUntil 0).
// The incarnation is unique per supervisor run (host, the segment creator's pid and epoch), so
// a restarted worker 0 keeps it.
func NewNodeMember(eng Engine, o NodeOptions) *Member {
	if eng == nil {
		o.Seg.Fence().SetGrantUntil(0)
		return nil
	}
	l := o.Seg.Layout()
	host, _ := os.Hostname()
	opts := Options{
		Registry:    eng,
		ID:          o.ID,
		Addr:        o.Addr,
		Incarnation: fmt.Sprintf("%s/%d/%d", host, l.CreatorPID, l.EpochMs),
		TTL:         o.TTL,
		Shards:      eng.Shards(),
		Owned:       eng.SetOwned,
		Fence:       o.Seg.Fence(),
		Leases:      o.Seg.Leases(),
		Worker:      o.Worker,
		Now:         o.Now,
		Log:         o.Log,
		Event:       o.Event,
		Members:     o.Members,
		Retick:      o.TTL / Retick,
	}
	publishCapacity(&opts, o.Figures, o.Recount)
	return NewMember(opts)
}

// publishCapacity makes opts publish figures with every heartbeat, and call recount when the
// shards the node holds change. Without figures it does neither.
func publishCapacity(opts *Options, figures func() []byte, recount func()) {
	if figures == nil {
		return
	}
	opts.Figures = figures
	owned := opts.Owned
	var mu sync.Mutex
	var last []int32
	opts.Owned = func(ctx context.Context, shards []int32, epochs []int64) error {
		err := owned(ctx, shards, epochs)
		mu.Lock()
		changed := !slices.Equal(last, shards)
		last = slices.Clone(shards)
		mu.Unlock()
		if changed && recount != nil {
			recount()
		}
		return err
	}
}
