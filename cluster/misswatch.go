package cluster

import (
	"context"
	"time"

	"github.com/freshq/freshq/internal/startstop"
)

// MissWatchPeriod is how often a node of a cluster asks the database whether a page its
// waiters wait for was committed by another node: a waiter is answered within it of the
// commit (plus the read).
const MissWatchPeriod = 250 * time.Millisecond

// Waiters are a node's render-on-miss waiters (misses.Flights): Watch asks present every period
// which of the pages waited for are committed, and answers their waiters, until ctx ends.
type Waiters interface {
	Watch(ctx context.Context, period time.Duration, present func(ctx context.Context, keys [][]byte) ([][]byte, error))
}

// MissWatch wakes the node's render-on-miss waiters when another node of the cluster commits
// their page. It keeps the startstop contract.
type MissWatch struct {
	startstop.BaseStartStop
	waiters Waiters
	present func(ctx context.Context, keys [][]byte) ([][]byte, error)
}

// NewMissWatch returns the miss watch of a node on eng: nil when eng is nil (the embedded
// store, whose worker 0 applies every result and wakes its waiters itself).
func NewMissWatch(eng Engine, w Waiters) *MissWatch {
	if eng == nil {
		return nil
	}
	return &MissWatch{waiters: w, present: eng.PagesPresent}
}

// Start watches until Stop.
func (w *MissWatch) Start(ctx context.Context) error {
	ctx, start, done := w.StartInit(ctx)
	if !start {
		return nil
	}
	go func() {
		defer done()
		w.waiters.Watch(ctx, MissWatchPeriod, w.present)
	}()
	return nil
}
