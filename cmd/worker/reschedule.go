package main

import (
	"context"
	"errors"

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
	out, err := s.targets.Reschedule(ctx, func(p intake.RescheduleProgress) {
		if !p.Done {
			log.Info().Int("scanned", p.Scanned).Int("moved", p.Moved).Msg("reschedule in progress")
		}
	})
	switch {
	case errors.Is(err, context.Canceled):
		log.Info().Int("scanned", out.Scanned).Int("moved", out.Moved).Msg("reschedule stopped; the next start finishes it")
	case err != nil:
		log.Error().Err(err).Int("scanned", out.Scanned).Int("moved", out.Moved).Msg("reschedule failed; the next reload or start retries it")
		return ""
	default:
		log.Info().Int("scanned", out.Scanned).Int("moved", out.Moved).Int("total", out.Scanned).Msg("reschedule done")
	}
	return key
}
