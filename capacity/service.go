package capacity

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Service is worker 0's capacity accounting: it owns the ledger and the meter (which the
// write path feeds through Wrap and WrapStore), recounts demand at start and every
// RecountEvery, and answers the capacity view. It keeps the startstop contract.
type Service struct {
	startstop.BaseStartStop
	Ledger *Ledger
	Meter  *Meter
	Store  Source
	Policy func() *policy.Policy
	Now    func() int64
	// Backlog is the due rows now (worker 0's backlog counters of the last sweep).
	Backlog func() uint64
	Log     zerolog.Logger
	// Every is the recount period; 0 is RecountEvery. Tests set a short one.
	Every time.Duration

	mu            sync.Mutex
	recountedAtMs int64
	drift         float64
}

// NewService returns a service with a fresh ledger and meter.
func NewService(st Source, pol func() *policy.Policy, now func() int64, backlog func() uint64, log zerolog.Logger) *Service {
	return &Service{Ledger: NewLedger(pol), Meter: &Meter{}, Store: st, Policy: pol, Now: now, Backlog: backlog,
		Log: log.With().Str("component", "capacity").Logger()}
}

// Start recounts at once in the background, then every Every, until Stop or ctx's end.
func (s *Service) Start(ctx context.Context) error {
	ctx, start, done := s.StartInit(ctx)
	if !start {
		return nil
	}
	every := s.Every
	if every <= 0 {
		every = RecountEvery * time.Millisecond
	}
	go func() {
		defer done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.recount(ctxSource{Source: s.Store, ctx: ctx})
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Recount recounts demand now (Ledger.Recount), logging its drift; a failure is logged and the
// incremental figure kept.
func (s *Service) Recount() { s.recount(s.Store) }

func (s *Service) recount(src Source) {
	d, err := s.Ledger.Recount(src, s.Log)
	if err != nil {
		s.Log.Error().Err(err).Msg("capacity recount failed; keeping the incremental demand")
		return
	}
	s.mu.Lock()
	s.recountedAtMs, s.drift = s.Now(), math.Abs(d.RecountTotal-d.IncrementalTotal)
	s.mu.Unlock()
}

// View is the capacity view as of now.
func (s *Service) View() wire.Capacity {
	now := s.Now()
	d := s.Ledger.Demand()
	c := s.Meter.Rate(now)
	var backlog uint64
	if s.Backlog != nil {
		backlog = s.Backlog()
	}
	p := Project(d, c, s.Policy().Boost(), backlog)
	var v wire.Capacity
	v.NowMs = now
	v.Demand.Total, v.Demand.Rows, v.Demand.ByLane, v.Demand.ByRoute = d.Total, d.Rows, d.ByLane, d.ByRoute
	v.Capacity.PerSecond, v.Capacity.RetryShare, v.Capacity.RecheckShare = c.PerSecond, c.RetryShare, c.RecheckShare
	v.Capacity.WindowS = float64(c.WindowMs) / 1000
	pr := &v.Projection
	pr.ByLane, pr.ByRoute, pr.Utilisation, pr.SurplusPerHour = p.ByLane, p.ByRoute, p.Utilisation, p.SurplusPerHour
	pr.DrainSeconds, pr.Backlog, pr.Verdict, pr.CadenceCapacity = p.DrainSeconds, backlog, p.Verdict, p.CadenceCapacity
	s.mu.Lock()
	v.RecountedAtMs, v.RecountDrift = s.recountedAtMs, s.drift
	s.mu.Unlock()
	return v
}

// ctxSource stops a recount's read when ctx ends, so that Stop does not wait for a full read
// of a large store.
type ctxSource struct {
	Source
	ctx context.Context
}

func (c ctxSource) ForEachSchedule(prefix []byte, fn func(key []byte, row store.Row) error) error {
	return c.Source.ForEachSchedule(prefix, func(key []byte, row store.Row) error {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		return fn(key, row)
	})
}

// Plan is Plan over the service's store at its current capacity, for the policy of a proposed
// configuration (which has passed its validation).
func (s *Service) Plan(next *policy.Policy) (wire.Plan, error) {
	var backlog uint64
	if s.Backlog != nil {
		backlog = s.Backlog()
	}
	return Plan(s.Store, s.Policy(), next, s.Meter.Rate(s.Now()), backlog)
}
