package renderloop

import (
	"context"
	"sync"
	"time"

	"github.com/freshq/freshq/shm"
)

// farmWake tells a render worker's idle loops when worker 0 wrote the node's farm words anew:
// a new membership, round or settled division of the hosts' limits (hosts.Farm), under which
// a host's share on this node may have grown. A loop that found nothing to claim backs off to
// a second; a share that grows on a node whose loops are backed off would otherwise idle until
// the next of them wakes (they back off together, so about a second), at every handover of a
// host's slot to this node. The words are polled every farmWakePoll, one atomic read; the
// clock offset the farm writes at each tick is left out, so a tick alone wakes nobody.
type farmWake struct {
	seg  *shm.Segment
	mu   sync.Mutex
	ch   chan struct{} // closed at the next change
	last [3]uint64
}

// farmWakePoll is how often the farm words are read.
const farmWakePoll = idleMin

func newFarmWake(seg *shm.Segment) *farmWake {
	w := &farmWake{seg: seg, ch: make(chan struct{})}
	w.last = w.words()
	return w
}

// words are the farm words that name the division: the membership (rank, count, the one
// before), since when, and the round and settled round.
func (w *farmWake) words() [3]uint64 {
	f := w.seg.Hosts().LoadFarm()
	return [3]uint64{f[0], f[1], f[3]}
}

// changed is closed at the next change of the farm words after the call. nil on a nil
// farmWake (a select on it never fires).
func (w *farmWake) changed() <-chan struct{} {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

// run polls the farm words until ctx ends.
func (w *farmWake) run(ctx context.Context) {
	t := time.NewTicker(farmWakePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A read that raced worker 0's writing reads all zero: not a change.
		if cur := w.words(); cur != w.last && cur != ([3]uint64{}) {
			w.last = cur
			w.mu.Lock()
			close(w.ch)
			w.ch = make(chan struct{})
			w.mu.Unlock()
		}
	}
}
