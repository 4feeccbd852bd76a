package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/testkit/pgtest"
)

// benchDueRows is the size of the sweep benchmark's due set; FRESHQ_BENCH_SWEEP_ROWS changes it.
func benchDueRows() int {
	if n, err := strconv.Atoi(os.Getenv("FRESHQ_BENCH_SWEEP_ROWS")); err == nil && n > 0 {
		return n
	}
	return 500_000
}

// loadDue fills a fresh database with n due rows, spread over the shards as real keys are, by
// COPY (the load is not what is measured), and analyzes the table as autovacuum would.
func loadDue(b *testing.B, n int) (*pgstore.Store, string) {
	b.Helper()
	dsn := pgtest.NewDatabase(b)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, dsn, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	conn := benchConn(b, dsn)
	flags := int16(store.Projection{Submitted: true}.Flags())
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"freshq_schedule"},
		[]string{"cache_key", "shard", "due_at_ms", "flags", "effective_interval_ms", "stored_interval_ms"},
		pgx.CopyFromSlice(n, func(i int) ([]any, error) {
			key := []byte(fmt.Sprintf("desktop|https://www.example-shop.com/catalog/p/%08d", i))
			return []any{key, pgstore.Shard(key, st.Shards()), int64(1_000_000 + i), flags, int64(3_600_000), int64(0)}, nil
		}))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE freshq_schedule`); err != nil {
		b.Fatal(err)
	}
	return st, dsn
}

// rawRows runs a statement and counts its rows, taken raw: the baseline a benchmark sets its
// store's read beside.
func rawRows(b *testing.B, conn *pgx.Conn, sql string, args ...any) int {
	b.Helper()
	rs, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Close()
	rows := 0
	for rs.Next() {
		_ = rs.RawValues()
		rows++
	}
	if err := rs.Err(); err != nil {
		b.Fatal(err)
	}
	return rows
}

// BenchmarkSweepPass is a sweep's read of every due row from PostgreSQL (a pass: snapshot,
// IterateDue from the shards' floors in (due, key) order, decoded rows handed over in chunks)
// beside a bare SELECT of the same columns through pgx, in the same run on the same database.
// ns/row is per due row.
func BenchmarkSweepPass(b *testing.B) {
	n := benchDueRows()
	st, dsn := loadDue(b, n)
	now := int64(1_000_000 + n)

	b.Run("pass", func(b *testing.B) {
		for b.Loop() {
			p, err := st.BeginPass(now)
			if err != nil {
				b.Fatal(err)
			}
			rows := 0
			if err := p.IterateDue(0, 1024, func(rs []store.DueRow) error { rows += len(rs); return nil }); err != nil {
				b.Fatal(err)
			}
			p.Close()
			if rows != n {
				b.Fatalf("%d rows, want %d", rows, n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
	})
	b.Run("bare-select", func(b *testing.B) {
		conn := benchConn(b, dsn)
		for b.Loop() {
			if rows := rawRows(b, conn, `SELECT cache_key, due_at_ms, flags, effective_interval_ms, stored_interval_ms FROM freshq_schedule`); rows != n {
				b.Fatalf("%d rows, want %d", rows, n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
	})
}

// perShardRowsSQL is how the recount once read the store: one statement per shard, each an index
// probe of the targets per row. BenchmarkRecountRead measures it beside ForEachOwnedRow.
const perShardRowsSQL = `SELECT s.cache_key, s.due_at_ms, s.flags, s.effective_interval_ms, s.stored_interval_ms, s.rank_interval_ms, t.value
	FROM freshq_schedule s LEFT JOIN freshq_target t ON t.cache_key = s.cache_key
	WHERE s.shard = $1`

// BenchmarkRecountRead is the capacity recount's read of every row and its target
// (ForEachOwnedRow) beside the statement-per-shard read it replaced, on the same database in one
// run: FRESHQ_BENCH_RECOUNT_ROWS rows (default 200,000), each with a target. ns/row is per row.
func BenchmarkRecountRead(b *testing.B) {
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("FRESHQ_BENCH_RECOUNT_ROWS")); err == nil && v > 0 {
		n = v
	}
	st, dsn := loadDue(b, n)
	ctx := context.Background()
	conn := benchConn(b, dsn)
	_, err := conn.CopyFrom(ctx, pgx.Identifier{"freshq_target"}, []string{"cache_key", "value"},
		pgx.CopyFromSlice(n, func(i int) ([]any, error) {
			url := fmt.Sprintf("https://www.example-shop.com/catalog/p/%08d", i)
			v, err := store.Target{URL: url, Device: "desktop", Source: store.SourceSitemap, Route: "product",
				StoredIntervalMs: 3_600_000, LastRender: store.RenderSummary{Status: 200, AtMs: 999_000, Bytes: 30_000}}.MarshalBinary()
			return []any{[]byte("desktop|" + url), v}, err
		}))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE freshq_target`); err != nil {
		b.Fatal(err)
	}

	b.Run("one-statement", func(b *testing.B) {
		for b.Loop() {
			rows, withTarget := 0, 0
			_, err := st.ForEachOwnedRow(ctx, func(_ []byte, _ store.Row, tgt *store.Target) error {
				rows++
				if tgt != nil {
					withTarget++
				}
				return nil
			})
			if err != nil || rows != n || withTarget != n {
				b.Fatalf("%d rows, %d with a target, want %d: %v", rows, withTarget, n, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
	})
	b.Run("statement-per-shard", func(b *testing.B) {
		for b.Loop() {
			rows := 0
			for sh := range int32(st.Shards()) {
				rows += rawRows(b, conn, perShardRowsSQL, sh)
			}
			if rows != n {
				b.Fatalf("%d rows, want %d", rows, n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
	})
}

// everyShardsPageSQL is how the claim path's scan once read the shards: a page from every
// shard, merged by the database. BenchmarkClaimScan measures it beside ScanDue.
const everyShardsPageSQL = `SELECT x.* FROM generate_series(0, $3 - 1) AS o(shard) CROSS JOIN LATERAL
	(SELECT s.cache_key, s.due_at_ms, s.flags, s.effective_interval_ms, s.stored_interval_ms, s.rank_interval_ms
	 FROM freshq_schedule s WHERE s.shard = o.shard AND s.due_at_ms <= $1
	 ORDER BY s.due_at_ms, s.cache_key LIMIT $2) x
	ORDER BY x.due_at_ms, x.cache_key LIMIT $2`

// BenchmarkClaimScan is the claim path's scan for a page of 64 due rows (ScanDue, as
// claim.IndexSource asks) over FRESHQ_BENCH_SWEEP_ROWS due rows (default 500,000) in the
// default 256 shards, beside the page-from-every-shard statement it replaced, on the same
// database in one run.
func BenchmarkClaimScan(b *testing.B) {
	const page = 64
	n := benchDueRows()
	st, dsn := loadDue(b, n)
	now := int64(1_000_000 + n)
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			res, err := st.ScanDue(st.HeadMs(), now, page)
			if err != nil || len(res.Rows) != page || !res.Capped {
				b.Fatalf("%d rows, capped %v, %v", len(res.Rows), res.Capped, err)
			}
		}
	})
	b.Run("every-shards-page", func(b *testing.B) {
		conn := benchConn(b, dsn)
		for b.Loop() {
			if rows := rawRows(b, conn, everyShardsPageSQL, now, page+1, st.Shards()); rows != page+1 {
				b.Fatalf("%d rows, want %d", rows, page+1)
			}
		}
	})
}

// benchConn is a connection of its own to dsn, closed when b ends: for the statements a
// benchmark runs beside the store's.
func benchConn(b *testing.B, dsn string) *pgx.Conn {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
