package pgstore_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/testkit/pgtest"
)

// A page of ListSchedule deep into a prefix is a range scan of the primary key that reads the
// page's rows and no more, however many keys lie before the cursor or after the page: on a
// table of 200,000 rows (ten sites of 20,000), analyzed, the plan of a page of 51 rows 15,000
// keys into one site is an index scan of freshq_schedule_pkey bounded on both sides, no
// sequential scan and no sort, whose index scan hands out 51 rows.
func TestListScheduleIsAnIndexRangeScan(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	openStore(t, dsn, &pgstore.Options{Shards: conformanceShards}) // the schema
	db := rawPool(t, dsn)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO freshq_schedule (cache_key, shard, due_at_ms, flags, effective_interval_ms, stored_interval_ms)
		SELECT convert_to('desktop|https://s' || (i % 10) || '.test/p/' || lpad((i / 10)::text, 6, '0'), 'UTF8'), 0, 1000, 0, 0, 0
		FROM generate_series(0, 199999) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `ANALYZE freshq_schedule`); err != nil {
		t.Fatal(err)
	}
	prefix := []byte("desktop|https://s3.test/p/")
	after := []byte(fmt.Sprintf("desktop|https://s3.test/p/%06d", 15000))
	q, args := pgstore.ListScheduleQueryForTest(prefix, after, 51)
	plan := explain(t, db, q, args)
	t.Logf("plan:\n%s", plan)
	if !strings.Contains(plan, "Index Scan using freshq_schedule_pkey") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort") {
		t.Fatalf("not a range scan of the primary key:\n%s", plan)
	}
	if !regexp.MustCompile(`Index Cond: \(\(cache_key > .*\) AND \(cache_key < .*\)\)`).MatchString(plan) {
		t.Errorf("the index condition does not bound both ends of the range:\n%s", plan)
	}
	m := regexp.MustCompile(`Index Scan using freshq_schedule_pkey.*\(actual rows=([0-9.]+) loops=1\)`).FindStringSubmatch(plan)
	if m == nil || (m[1] != "51" && m[1] != "51.00") {
		t.Errorf("the index scan handed out %v rows, want the page's 51:\n%s", m, plan)
	}
	// The rows it lists are the page's.
	st := openStore(t, dsn, &pgstore.Options{Shards: conformanceShards})
	rows, err := st.ListSchedule(ctx, prefix, after, 51)
	if err != nil || len(rows) != 51 || string(rows[0].Key) != "desktop|https://s3.test/p/015001" || string(rows[50].Key) != "desktop|https://s3.test/p/015051" {
		t.Fatalf("%d rows %v", len(rows), err)
	}
}

// explain runs EXPLAIN ANALYZE of q with args, without costs or timings, and returns the plan.
func explain(t *testing.T, db *pgxpool.Pool, q string, args []any) string {
	t.Helper()
	rows, err := db.Query(context.Background(), `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) `+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
