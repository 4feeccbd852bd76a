package node

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/startstop"
)

// rescheduleService is worker 0's reschedule (intake.Targets.Reschedule) in the background:
// one run at worker 0's start (a restart with a shortened interval, or one that interrupted a
// run, finishes the job) and one after every reload. A reload during a run starts another once
// it ends: the rows a run moved are not found again, so the second is the first's remainder
// under the new file. Each run logs where it stands after every chunk it writes and when it
// ends (rows scanned, rows moved), so an operator can follow a large one. A reload also has the
// capacity accounting recount its demand under the new file (reloaded).
type rescheduleService struct {
	startstop.BaseStartStop
	e       *env
	targets *intake.Targets
	reloads <-chan struct{} // a reload put a new configuration in force
	// reloaded is called at each reload, before the run: the capacity recount
	// (capacity.Service.Reloaded), so that the demand follows the new cadences at once.
	reloaded func()

	// Where the current (or last) run stands, for /metrics (register).
	running        atomic.Bool
	scanned, moved atomic.Int64
	runs           atomic.Uint64
}

// register exports the runs' progress in reg (worker 0's series, which the supervisor's
// /metrics merges): freshq_reschedule_running, freshq_reschedule_rows_scanned and
// freshq_reschedule_rows_moved (of the current run, else the last), freshq_reschedule_runs_total.
func (s *rescheduleService) register(reg prometheus.Registerer) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "freshq_reschedule_running",
			Help: "1 while worker 0 refiles the rows a reload's (or a restart's) shorter cadences leave due too late."},
			func() float64 { return b(s.running.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "freshq_reschedule_rows_scanned",
			Help: "Schedule rows the current reschedule run has read, else the last run."},
			func() float64 { return float64(s.scanned.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "freshq_reschedule_rows_moved",
			Help: "Rows the current reschedule run has refiled at their new cadence, else the last run."},
			func() float64 { return float64(s.moved.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "freshq_reschedule_runs_total",
			Help: "Reschedule runs finished (every row read), since worker 0 started."},
			func() float64 { return float64(s.runs.Load()) }))
}

func (s *rescheduleService) Start(ctx context.Context) error {
	ctx, start, done := s.StartInit(ctx)
	if !start {
		return nil
	}
	go func() {
		defer done()
		last := s.run(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.reloads:
				if s.reloaded != nil {
					s.reloaded()
				}
			}
			// A reload that changed no cadence (only log.level, say) has no row to move: the
			// last run's policy bound every row as this one does.
			if key := s.e.policy().CadenceKey(); key == last {
				s.e.log.Debug().Msg("reschedule skipped: the reload changed no cadence")
				continue
			}
			last = s.run(ctx)
		}
	}()
	return nil
}

// run reschedules once and returns the cadence key (policy.CadenceKey) of the policy it ran
// under. A failed run returns "", so that the next reload runs again whatever it changed.
func (s *rescheduleService) run(ctx context.Context) string {
	key := s.e.policy().CadenceKey() // read before the run's policy: a reload meanwhile runs again
	log := s.e.log
	s.scanned.Store(0)
	s.moved.Store(0)
	s.running.Store(true)
	defer s.running.Store(false)
	out, err := s.targets.Reschedule(ctx, func(p intake.RescheduleProgress) {
		s.scanned.Store(int64(p.Scanned))
		s.moved.Store(int64(p.Moved))
		if !p.Done {
			log.Info().Int("scanned", p.Scanned).Int("moved", p.Moved).Msg("reschedule in progress")
		}
	})
	s.scanned.Store(int64(out.Scanned))
	s.moved.Store(int64(out.Moved))
	switch {
	case errors.Is(err, context.Canceled):
		log.Info().Int("scanned", out.Scanned).Int("moved", out.Moved).Msg("reschedule stopped; the next start finishes it")
	case err != nil:
		log.Error().Err(err).Int("scanned", out.Scanned).Int("moved", out.Moved).Msg("reschedule failed; the next reload or start retries it")
		return ""
	default:
		s.runs.Add(1)
		log.Info().Int("scanned", out.Scanned).Int("moved", out.Moved).Int("total", out.Scanned).Msg("reschedule done")
	}
	return key
}
