package sweeploop

import (
	"context"
	"time"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/sweep"
)

// Service is worker 0's sweep loop (loop) as a startstop.Service.
type Service struct {
	startstop.BaseStartStop
	sweeper  *sweep.Sweeper
	interval func() time.Duration // queue.ready.sweep_interval in force
	now      func() int64         // Unix ms
	kick     chan struct{}        // a claim found the ready set exhausted: sweep early
}

// New is the sweep loop of sweeper, waiting interval() (read after each sweep, so that a reload
// applies to the next wait) between sweeps.
func New(sweeper *sweep.Sweeper, interval func() time.Duration, now func() int64) *Service {
	return &Service{sweeper: sweeper, interval: interval, now: now, kick: make(chan struct{}, 1)}
}

// Kick is where a claim asks for an early sweep (KickingFallback): one request pending at most.
func (s *Service) Kick() chan<- struct{} { return s.kick }

// Start sweeps at once and then on the loop's schedule, until Stop or ctx's end.
func (s *Service) Start(ctx context.Context) error {
	ctx, start, done := s.StartInit(ctx)
	if !start {
		return nil
	}
	go func() {
		defer done()
		loop(ctx, s.sweeper, s.interval, s.now, s.kick)
	}()
	return nil
}

var _ startstop.Service = (*Service)(nil)

// loop sweeps at once, then every queue.ready.sweep_interval as it stands after each
// sweep (a reload changes the interval without a restart), and early when a claim finds the
// ready set exhausted, two sweep durations after the claim asked (kickWait). A sweep that left
// a paused host's rows out sweeps again when the pause ends, if that is sooner than the tick.
// Whatever the reason, the next sweep waits at least as long as the last one took (sweepWait),
// so sweeping takes at most half of worker 0 however hard the claims press and however large
// the due set a sweep reads.
func loop(ctx context.Context, s *sweep.Sweeper, interval func() time.Duration, now func() int64, kick <-chan struct{}) {
	for {
		start := time.Now()
		res, _ := s.Sweep(ctx)
		took := time.Since(start)
		resumes := res.HostResumeMs > 0
		resumeIn := time.Duration(res.HostResumeMs-now()) * time.Millisecond
		wait := sweepWait(interval(), took, resumes, resumeIn)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-kick:
			t.Stop()
			if gap := kickWait(took, time.Since(start)-took, wait); gap > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(gap):
				}
			}
		}
	}
}

// minResumeWait spaces a sweep for a host's pause end from the sweep before it.
const minResumeWait = 10 * time.Millisecond

// kickWait is how long the sweep loop waits, once a claim found the ready set exhausted
// sinceEnd after a sweep that took took, before it sweeps early: two sweep durations (20 ms at
// least), never past the wait the loop was in (sweepWait, counted from the sweep's end).
func kickWait(took, sinceEnd, wait time.Duration) time.Duration {
	return max(0, min(max(2*took, 20*time.Millisecond), wait-sinceEnd))
}

// sweepWait is how long the sweep loop waits after a sweep that took took: the interval, or
// until a paused host resumes (resumes: in resumeIn) if that is sooner, spaced minResumeWait at
// least;
// and never less than took, so that a sweep longer than the interval (a due set that outgrew
// it: a store of one host whose limit keeps the ready set from filling reads the whole due set)
// leaves worker 0 at least half of its time for results, writes and serving.
func sweepWait(interval, took time.Duration, resumes bool, resumeIn time.Duration) time.Duration {
	wait := interval
	if resumes {
		wait = min(wait, max(resumeIn, minResumeWait))
	}
	return max(wait, took)
}

// KickingFallback is worker 0's index fallback; when the ready set is exhausted (rather than
// cold or disabled) it also asks the sweep loop to run early.
type KickingFallback struct {
	claim.Fallback
	Ready *shm.Ready
	Kick  chan<- struct{} // the sweep loop's kick (Service.Kick)
}

func (k KickingFallback) ClaimIndex(ctx context.Context, req claim.IndexClaim) ([]claim.Job, error) {
	if st := k.Ready.Stats(); st.Enabled && st.Gen > 0 && st.Taken >= st.Count {
		select {
		case k.Kick <- struct{}{}:
		default:
		}
	}
	return k.Fallback.ClaimIndex(ctx, req)
}

// belowFloorEvery is how often worker 0 counts the rows below the floor (freshq_below_floor).
// The count reads the due index below the floor, where every row rescheduled since the last
// compaction (Badger) or vacuum (PostgreSQL) left a dead entry: a read that grows with the
// store, which after every sweep delayed the next one.
const belowFloorEvery = 10 * time.Second

// BelowFloorAlarm counts (up to a bound) the rows filed below the floor, F1 says there are
// none, at most once per belowFloorEvery. It is called from the sweeper's goroutine only.
type BelowFloorAlarm struct {
	st      floorCounter
	counted bool  // whether it has counted yet: the first sweep's count is never skipped
	lastMs  int64 // when it last counted
}

// AfterSweep counts the rows below the floor if belowFloorEvery has passed since the last
// count (or the clock went back), and reports whether it did.
func (a *BelowFloorAlarm) AfterSweep(nowMs int64) (n int, counted bool) {
	if a.counted && nowMs >= a.lastMs && nowMs-a.lastMs < belowFloorEvery.Milliseconds() {
		return 0, false
	}
	a.counted, a.lastMs = true, nowMs
	n, err := a.st.RowsBelowFloor(10_000)
	if err != nil {
		return 0, true
	}
	return n, true
}

// floorCounter is the store's count of the rows below the floor (store.Store.RowsBelowFloor).
type floorCounter interface {
	RowsBelowFloor(limit int) (int, error)
}

// NewBelowFloorAlarm is the alarm of st's rows below the floor.
func NewBelowFloorAlarm(st floorCounter) *BelowFloorAlarm { return &BelowFloorAlarm{st: st} }
