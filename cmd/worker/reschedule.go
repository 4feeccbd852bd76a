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
		for {
			s.run(ctx)
			select {
			case <-ctx.Done():
				return
			case <-s.reloads:
				if s.reloaded != nil {
					s.reloaded()
				}
			}
		}
	}()
	return nil
}

func (s *rescheduleService) run(ctx context.Context) {
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
	default:
		log.Info().Int("scanned", out.Scanned).Int("moved", out.Moved).Int("total", out.Scanned).Msg("reschedule done")
	}
}
