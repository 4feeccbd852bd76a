package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore/pgschema"
)

// vacuumCheckEvery is how often worker 0 reads the schedule table's dead-tuple count
// (pgschema.VacuumIfDead says why and when a vacuum runs).
const vacuumCheckEvery = 5 * time.Second

// VacuumIfDead runs VACUUM on the schedule table when its dead tuples are due a vacuum
// (pgschema.VacuumIfDead), and reports whether it ran one and the counts it decided on.
func (s *Store) VacuumIfDead(ctx context.Context) (ran bool, live, dead int64, err error) {
	if s.closed.Load() {
		return false, 0, 0, store.ErrClosed
	}
	return pgschema.VacuumIfDead(ctx, s.pool)
}

// vacuumLoop runs VacuumIfDead every vacuumCheckEvery until ctx ends, logging each vacuum and
// each failure; the next round tries again.
func (s *Store) vacuumLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(vacuumCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		ran, live, dead, err := s.VacuumIfDead(ctx)
		switch {
		case err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, store.ErrClosed):
			s.log.Warn().Err(err).Msg("schedule table vacuum failed")
		case ran:
			s.log.Info().Int64("live", live).Int64("dead", dead).Dur("took", time.Since(start)).Msg("schedule table vacuum")
		}
	}
}
