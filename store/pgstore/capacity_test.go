package pgstore_test

import (
	"context"
	"fmt"
	"github.com/freshq/freshq/assemble"
	"math"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/testkit/pgtest"
)

// statements counts the statements a store's connections start.
type statements struct{ n atomic.Int64 }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// plainSource hides ForEachOwnedRow: the recount's read as it was before, every row of the
// database and a target read per row.
type plainSource struct{ capacity.Source }

func capacityPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	cfg, err := config.Parse([]byte("routes:\n  - {name: catalog, match: prefix, path: /c/, interval: 24h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := assemble.Policy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// TestCapacityRecountReadsEachShardOnce: three nodes of a cluster, each holding a third of the
// shards, recount their demand: each reads only its own shards, all of them in one statement
// (rows and targets together, never a statement per shard or per row), so the cluster reads
// every shard once;
// and their demands add up to the demand of every row, counted by the read as it was (every
// row, a target read per row: a statement per row, which the count shows).
func TestCapacityRecountReadsEachShardOnce(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	pol := capacityPolicy(t)
	polf := func() *policy.Policy { return pol }
	ids := []string{"node-a", "node-b", "node-c"}
	var stores []*pgstore.Store
	var counters []*statements
	held := make([][]int32, len(ids))
	for i, id := range ids {
		c := &statements{}
		st := openStore(t, dsn, &pgstore.Options{Shards: clusterShards, Node: id, TestTracer: c})
		for sh := int32(i); sh < clusterShards; sh += int32(len(ids)) {
			held[i] = append(held[i], sh)
		}
		if err := st.SetOwned(ctx, held[i], make([]int64, len(held[i]))); err != nil {
			t.Fatal(err)
		}
		stores, counters = append(stores, st), append(counters, c)
	}
	const rows = 300
	var ws []store.Write
	for i := range rows {
		key := fmt.Appendf(nil, "desktop|https://shop.test/c/%d", i)
		sch, err := store.NewSchedule(key, 1_700_000_000_000, i%2 == 0, 0, store.Lanes{})
		if err != nil {
			t.Fatal(err)
		}
		tgt := &store.Target{URL: string(key[8:]), Device: "desktop", Source: store.SourceAPI}
		switch i % 3 {
		case 1:
			tgt.StoredIntervalMs = 6 * 3600 * 1000
		case 2:
			tgt.Terminal = store.TerminalGone // asks for no renders
		}
		ws = append(ws, store.Write{Schedule: sch, Target: tgt})
	}
	if err := stores[0].WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
	var sum float64
	var sumRows int64
	for i, st := range stores {
		l := capacity.NewLedger(polf)
		l.SetShards(func(k []byte) int32 { return pgstore.Shard(k, clusterShards) }, func() []int32 { return held[i] })
		before := counters[i].n.Load()
		d, err := l.Recount(st, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if n := counters[i].n.Load() - before; n != 1 {
			t.Errorf("%s's recount ran %d statements over its %d shards, want one", ids[i], n, len(held[i]))
		}
		sum += d.RecountTotal
		sumRows += d.Rows
	}
	// The read as it was: every row of the database, and a target per row.
	whole := capacity.NewLedger(polf)
	before := counters[0].n.Load()
	d, err := whole.Recount(plainSource{stores[0]}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	perRow := counters[0].n.Load() - before
	if want := int64(rows - rows/3); d.Rows != want || sumRows != want || math.Abs(sum-d.RecountTotal) > 1e-12 {
		t.Fatalf("the nodes count %d rows, %v renders/s; every row read at once: %d rows, %v/s; want %d rows, equal demand", sumRows, sum, d.Rows, d.RecountTotal, want)
	}
	if perRow <= rows {
		t.Fatalf("the read as it was ran %d statements for %d rows: the comparison does not show a statement per row", perRow, rows)
	}
	t.Logf("recount statements: 1 per node (of %d shards) against %d for the read as it was, over %d rows", len(held[0]), perRow, rows)
}
