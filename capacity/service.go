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
	// Freshness, if set, tunes queue.policy freshness at every recount (FreshTuner); nil: the
	// configuration's threshold and the routes' intervals stay.
	Freshness *FreshTuner
	// Shards is the number of shards the node holds, in a cluster (Figures reports it); nil
	// outside one.
	Shards func() int

	nudge  chan struct{}
	reload chan struct{}

	mu            sync.Mutex
	recountedAtMs int64
	drift         float64
}

// NewService returns a service with a fresh ledger and meter.
func NewService(st Source, pol func() *policy.Policy, now func() int64, backlog func() uint64, log zerolog.Logger) *Service {
	return &Service{Ledger: NewLedger(pol), Meter: &Meter{}, Store: st, Policy: pol, Now: now, Backlog: backlog,
		Log: log.With().Str("component", "capacity").Logger(), nudge: make(chan struct{}, 1), reload: make(chan struct{}, 1)}
}

// NudgeDelay is how long after a nudge (the shards held changed) the recount runs: the moves
// of one membership change come over a few ticks, and one recount reads them all.
const NudgeDelay = 2 * time.Second

// Nudge asks for a recount soon (NudgeDelay after the first nudge since the last recount): a
// cluster node calls it when the shards it holds change, so that a shard taken over is counted
// within seconds and not at the next periodic recount. It never blocks.
func (s *Service) Nudge() {
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

// Reloaded asks for a recount at once: the configuration in force changed. The ledger keeps
// each row's contribution as the policy of its last write decided it, so without a recount
// the demand (`freshqctl top`) would stay the old cadences' until the next periodic one, while
// a plan (`freshqctl plan`) reads every row under the policy in force. It never blocks.
func (s *Service) Reloaded() {
	select {
	case s.reload <- struct{}{}:
	default:
	}
}

// Start recounts at once in the background, then every Every (every UntunedRecountEvery while
// queue.policy freshness waits for its first tuning: nextRecount), until Stop or ctx's end.
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
		for {
			s.recount(ctx)
			t := time.NewTimer(s.nextRecount(every))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			case <-s.reload:
			case <-s.nudge:
				select {
				case <-ctx.Done():
					return
				case <-time.After(NudgeDelay):
				}
			}
			t.Stop()
		}
	}()
	return nil
}

// UntunedRecountEvery is the recount period while queue.policy freshness has no tuning yet:
// the tuning starts at the first recount after the meter has counted TuneMinRenders renders,
// so a node waits at most this long past that, not a whole recount period. After each tuning
// the period doubles until it reaches the recount period (30 s, 1, 2, 4, 8 minutes, then 10):
// the first tuning reads estimates made of a render or two per page and request counts of a
// minute, and the next ones, soon after, read what the renders since have observed, so a new
// site is steered by what it is seen to do within minutes, and a steady one is retuned at the
// recount period. A recount reads every row; on a large store the early ones are a handful.
const UntunedRecountEvery = 30 * time.Second

// nextRecount is the time to the next periodic recount: every, or under queue.policy
// freshness UntunedRecountEvery doubled at every tuning so far, at most every.
func (s *Service) nextRecount(every time.Duration) time.Duration {
	if s.Freshness == nil || s.Freshness.Settings == nil || !s.Freshness.Settings().On {
		return every
	}
	s.mu.Lock()
	tunings := s.Freshness.tunings
	s.mu.Unlock()
	return min(every, UntunedRecountEvery<<min(tunings, 20))
}

// Recount recounts demand now (Ledger.Recount), logging its drift; a failure is logged and the
// incremental figure kept.
func (s *Service) Recount() { s.recount(context.Background()) }

func (s *Service) recount(ctx context.Context) {
	pol := s.Policy()
	var fs FreshSettings
	if s.Freshness != nil {
		fs = s.Freshness.Settings()
	}
	tune := fs.On
	var pages []FreshPage
	src := s.Store
	if tune {
		now := s.Now()
		src = tapPages(src, func(key []byte, row store.Row, t *store.Target) {
			if pg, ok := s.Freshness.Page(key, row, t, now); ok {
				pages = append(pages, pg)
			}
		})
	}
	d, err := s.Ledger.RecountContext(ctx, src, s.Log)
	if err != nil {
		s.Log.Error().Err(err).Msg("capacity recount failed; keeping the incremental demand")
		return
	}
	if tune {
		s.tune(pol, fs, pages)
	}
	s.mu.Lock()
	s.recountedAtMs, s.drift = s.Now(), math.Abs(d.RecountTotal-d.IncrementalTotal)
	s.mu.Unlock()
}

// tune computes and publishes the freshness tuning from the recount's pages (TuneFreshness),
// logging it (info "freshness tuned" with nu, capacity_per_second, saturated, pages).
func (s *Service) tune(pol *policy.Policy, fs FreshSettings, pages []FreshPage) {
	now := s.Now()
	var backlog uint64
	if s.Backlog != nil {
		backlog = s.Backlog()
	}
	f := s.Freshness
	s.mu.Lock() // Recount may be called beside the periodic one
	defer s.mu.Unlock()
	t, ok := TuneFreshness(FreshInput{Demand: s.Ledger.Demand(), Measured: s.Meter.Rate(now), Boost: pol.Boost(),
		Backlog: backlog, SweepMs: fs.SweepMs, PrevPerSecond: f.perSecond, PrevStretch: f.stretch, PrevAtMs: f.tunedAtMs,
		NowMs: now, Pages: pages, StretchFactor: fs.StretchFactor})
	if !ok {
		return
	}
	f.perSecond, f.stretch, f.tunedAtMs = t.PerSecond, t.Stretch, now
	f.tunings++
	f.Cell.Store(&t.Tuning) // ν, the stretch and the routes' pooled change rates
	s.Log.Info().Float64("nu", t.Nu).Float64("capacity_per_second", t.PerSecond).Bool("saturated", t.Saturated).
		Int("pages", len(pages)).Msg("freshness tuned")
}

// View is the capacity view as of now.
func (s *Service) View() wire.Capacity {
	now := s.Now()
	v := viewOf(s.Ledger.Demand(), s.Meter.Rate(now), s.Policy().Boost(), s.backlog())
	v.NowMs = now
	s.mu.Lock()
	v.RecountedAtMs, v.RecountDrift = s.recountedAtMs, s.drift
	s.mu.Unlock()
	return v
}

func (s *Service) backlog() uint64 {
	if s.Backlog == nil {
		return 0
	}
	return s.Backlog()
}

// viewOf is demand d at capacity c with backlog, projected with boost, as the wire shows it.
func viewOf(d Demand, c Capacity, boost float64, backlog uint64) wire.Capacity {
	p := Project(d, c, boost, backlog)
	var v wire.Capacity
	v.Demand.Total, v.Demand.Rows, v.Demand.ByLane, v.Demand.ByRoute = d.Total, d.Rows, d.ByLane, d.ByRoute
	v.Capacity.PerSecond, v.Capacity.RetryShare, v.Capacity.RecheckShare = c.PerSecond, c.RetryShare, c.RecheckShare
	v.Capacity.Renders, v.Capacity.WindowS = c.Renders, float64(c.WindowMs)/1000
	pr := &v.Projection
	pr.ByLane, pr.ByRoute, pr.Utilisation, pr.SurplusPerHour = p.ByLane, p.ByRoute, p.Utilisation, p.SurplusPerHour
	pr.DrainSeconds, pr.Backlog, pr.Verdict, pr.CadenceCapacity = p.DrainSeconds, backlog, p.Verdict, p.CadenceCapacity
	return v
}

// Plan is Plan over the service's store at its current capacity, for the policy of a proposed
// configuration (which has passed its validation).
func (s *Service) Plan(next *policy.Policy) (wire.Plan, error) {
	return Plan(s.Store, s.Policy(), next, s.Meter.Rate(s.Now()), s.backlog())
}
