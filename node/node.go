package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/internal/grantlog"
	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// Settings is what a worker process is told: who it is, where worker 0 listens, and the
// configuration in force (which a reload replaces whole).
type Settings struct {
	Index   int    // 0: the store worker; 1..N-1: render workers
	Holder  uint64 // this process's lease holder id
	Socket  string // worker 0's control socket
	ServeFD int    // worker 0: the crawler listener's inherited socket; 0: none
	InForce *atomic.Pointer[InForce]
	// Reloads is told of every reload put in force (one pending at most): worker 0 reschedules
	// the rows the new cadences move (rescheduleService).
	Reloads <-chan struct{}
}

// Deps is what a worker is built on: its share of the segment, its log and clock, and the
// parts of worker 0 that the binary assembles (the store's engine, and the cluster's parts on
// the capability it offers), passed in so that a test can watch them.
type Deps struct {
	Seg    *shm.Segment
	Worker *shm.Worker // this worker's block
	Log    zerolog.Logger
	Now    func() int64 // Unix ms
	// OpenStore opens worker 0's store (store.backend) under cfg, and the cluster capability its
	// engine offers (nil on Badger).
	OpenStore func(ctx context.Context, cfg *config.Config) (store.Store, cluster.Engine, error)
	// GrantLog opens the cluster's grant log (a test switch: nil, and no cost, unless asked
	// for) and returns it with the claim path's hook for it (claim.Options.Granted; nil: none).
	GrantLog func(cfg *config.Config) (*grantlog.Log, func(key []byte, grantUntil int64))
	Cluster  Cluster
}

// ErrStopped is Start after Stop: a node is started once.
var ErrStopped = errors.New("the node has been stopped")

// Node is a worker's services, in the order they start; they stop in the reverse order
// (startstop.StartAll, StopAll). It keeps the startstop contract: Stop without Start is a
// no-op, Stop twice is safe, Start while started is a no-op (and after Stop, ErrStopped). A
// Start that fails has stopped what it started.
type Node struct {
	services []startstop.Service
	failed   chan error // worker 0's control socket stopped serving; never for a render worker

	mu      sync.Mutex
	started bool
	stopped bool
}

// New assembles worker set.Index's services: worker 0's (openStoreWorker) or a render
// worker's. Nothing is started, opened or listened on until Start.
func New(set Settings, deps Deps) *Node {
	e := &env{index: set.Index, holder: set.Holder, socketPath: set.Socket, serveFD: set.ServeFD, cur: set.InForce, reloads: set.Reloads,
		log: deps.Log, seg: deps.Seg, worker: deps.Worker, now: deps.Now, deps: deps}
	n := &Node{failed: make(chan error, 1)}
	if set.Index == 0 {
		n.services = newWorker0(e, n.failed).services()
	} else {
		n.services = renderWorker(e)
	}
	return n
}

// Services are the node's services in their start order.
func (n *Node) Services() []startstop.Service { return n.services }

// Failed reports worker 0's control socket's failure to serve.
func (n *Node) Failed() <-chan error { return n.failed }

// Start starts the services in order. If one fails, those started are stopped and its error
// returned.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return ErrStopped
	}
	if n.started {
		return nil
	}
	n.started = true
	if err := startstop.StartAll(ctx, n.services...); err != nil {
		n.stopped = true
		return err
	}
	return nil
}

// Stop stops the services in the reverse order.
func (n *Node) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started || n.stopped {
		return
	}
	n.stopped = true
	startstop.StopAll(n.services...)
}

// env is what every part of a worker reads: its identity, its share of the segment, and the
// configuration in force.
type env struct {
	index      int
	holder     uint64
	socketPath string
	serveFD    int
	log        zerolog.Logger
	seg        *shm.Segment
	worker     *shm.Worker
	now        func() int64
	cur        *atomic.Pointer[InForce]
	reloads    <-chan struct{}
	deps       Deps
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
