package pgschema

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The schedule table's vacuum. Every render moves its row's due time, so it leaves a dead
// tuple and a dead entry in each of the table's indexes, and the dead entries of the due and
// class indexes lie at the heads of their shards and classes, where every pass reads (docs/
// postgres.md). How far a read steps over them is how many rows were rendered since the last
// vacuum. Under autovacuum's defaults that is up to a fifth of the table, vacuumed at most once a
// minute and then slowly, so the sweep's reads would grow with the store: at 2,000,000 rows
// the class heads alone read 11,000 index pages a pass (90 MB through a 128 MB buffer pool).
// So worker 0's store checks the table's count of dead tuples every 5 s (pgstore's
// vacuumCheckEvery) and vacuums it once they reach vacuumDeadShare of its live ones (and at
// least vacuumMinDead): the heads then
// hold a few seconds' renders, whatever the store's size. The price grows with the store: a
// vacuum reads every index of the table whole, and under a steady render rate one runs at
// every check (728–1,075 ms each at 2,000,000 rows, about half of what the server's CPU a job
// grows by from 200,000 rows). Checking less often has not paid in any trial (every 15 or 60 s
// moved the vacuum's time into reads over dead entries), and checking more often (every 1 or
// 2 s) gained nothing measurable (docs/BENCHMARKS.md).

const (
	// vacuumDeadShare and vacuumMinDead: a vacuum runs once the dead tuples reach this share of
	// the live ones, and at least this many (a small table is cheap to read over).
	vacuumDeadShare = 0.01
	vacuumMinDead   = 10_000
)

// vacuumDue reports whether a table of live tuples with dead ones is due a vacuum.
func vacuumDue(live, dead int64) bool {
	return dead >= vacuumMinDead && float64(dead) >= vacuumDeadShare*float64(live)
}

// VacuumIfDead runs VACUUM on the schedule table when its dead tuples are due a vacuum
// (vacuumDue, on PostgreSQL's statistics, which lag the writes by about a second). It reports
// whether it ran one and the counts it decided on. The VACUUM skips the table, with a warning
// in PostgreSQL's log, while another vacuum holds it (autovacuum's, or another node's worker 0
// on the same database), so nodes never queue behind one another.
func VacuumIfDead(ctx context.Context, pool *pgxpool.Pool) (ran bool, live, dead int64, err error) {
	if err := pool.QueryRow(ctx, `SELECT n_live_tup, n_dead_tup FROM pg_stat_user_tables
		WHERE relid = 'freshq_schedule'::regclass`).Scan(&live, &dead); err != nil {
		return false, 0, 0, fmt.Errorf("pgstore: vacuum: dead tuples: %w", err)
	}
	if !vacuumDue(live, dead) {
		return false, live, dead, nil
	}
	if _, err := pool.Exec(ctx, `VACUUM (SKIP_LOCKED) freshq_schedule`); err != nil {
		return false, live, dead, fmt.Errorf("pgstore: vacuum: %w", err)
	}
	return true, live, dead, nil
}
