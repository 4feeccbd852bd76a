package pgcluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/pgstore/pgcluster"
	"github.com/freshq/freshq/testkit/pgtest"
)

// The cluster view reads what the tables say, written here by SQL as the cluster's nodes would
// leave them: a live node, a dead one (its heartbeat older than the TTL, its leases expired but
// still naming it), a stopping one; shards held, expired, handed over and never acquired; and
// rows below a shard's floor, counted per shard up to the bound.
func TestClusterView(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	st := openCluster(t, dsn, &pgstore.Options{Shards: 8}, nil)
	db := rawPool(t, dsn)
	ctx := context.Background()
	exec := execer(t, db)
	// Times relative to the database's clock, so that the test does not depend on this
	// machine's clock agreeing with the server's.
	exec(`INSERT INTO freshq_node (node_id, addr, incarnation, started_at, heartbeat_at, stopping) VALUES
		('a', '10.0.0.1:8420', 'i1', now() - interval '1 hour', clock_timestamp() - interval '1 second', false),
		('b', '10.0.0.2:8420', 'i2', now() - interval '2 hours', clock_timestamp() - interval '30 seconds', false),
		('c', '10.0.0.3:8420', 'i3', now() - interval '3 hours', clock_timestamp() - interval '2 seconds', true)`)
	exec(`UPDATE freshq_shard_lease SET owner = 'a', epoch = shard + 10, expires_at = clock_timestamp() + interval '8 seconds' WHERE shard < 4`)
	exec(`UPDATE freshq_shard_lease SET owner = 'b', epoch = 3, expires_at = clock_timestamp() - interval '20 seconds' WHERE shard IN (4, 5)`)
	exec(`UPDATE freshq_shard_lease SET owner = NULL, epoch = 7, expires_at = clock_timestamp() - interval '1 second' WHERE shard = 6`)
	// shard 7: never acquired (owner NULL, epoch 0, expires_at -infinity, as the migration left it)
	exec(`UPDATE freshq_floor SET floor_ms = 1000 * (shard + 1)`)
	// Shard 2: three rows below its floor (3000) and one at it; shard 5: more than the bound.
	exec(`INSERT INTO freshq_schedule (cache_key, shard, due_at_ms, flags, effective_interval_ms, stored_interval_ms) VALUES
		('k1', 2, 10, 0, 0, 0), ('k2', 2, 2999, 0, 0, 0), ('k3', 2, 0, 0, 0, 0), ('k4', 2, 3000, 0, 0, 0),
		('k5', 3, 4000, 0, 0, 0)`)
	exec(`INSERT INTO freshq_schedule (cache_key, shard, due_at_ms, flags, effective_interval_ms, stored_interval_ms)
		SELECT convert_to('many' || i, 'UTF8'), 5, i % 6000, 0, 0, 0 FROM generate_series(1, $1::int) i`, 2*pgcluster.MaxRowsBelowFloorCounted)

	// Worker 0's alarm counts (all the shards are the store's, outside a cluster), and the view
	// reports that count.
	if n, err := st.RowsBelowFloor(10_000); err != nil || n != 3+pgcluster.MaxRowsBelowFloorCounted {
		t.Fatalf("the alarm's count: %d, %v; want %d", n, err, 3+pgcluster.MaxRowsBelowFloorCounted)
	}
	before := time.Now()
	v, err := st.ClusterView(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var dbNow time.Time
	if err := db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	if v.NowMs <= 0 || v.NowMs > dbNow.UnixMilli() || v.NowMs < dbNow.Add(-time.Minute).UnixMilli() {
		t.Fatalf("now %d, the database's clock after the view %d (this machine's before it %d)", v.NowMs, dbNow.UnixMilli(), before.UnixMilli())
	}

	type node struct {
		id, addr              string
		live, stopping        bool
		shards                int
		heartbeatAgo, started time.Duration
	}
	want := []node{
		{"a", "10.0.0.1:8420", true, false, 4, time.Second, time.Hour},
		{"b", "10.0.0.2:8420", false, false, 0, 30 * time.Second, 2 * time.Hour},
		{"c", "10.0.0.3:8420", true, true, 0, 2 * time.Second, 3 * time.Hour},
	}
	if len(v.Nodes) != len(want) {
		t.Fatalf("%d nodes, want %d: %+v", len(v.Nodes), len(want), v.Nodes)
	}
	near := func(gotMs int64, ago time.Duration) bool {
		d := time.Duration(v.NowMs-gotMs) * time.Millisecond
		return d >= ago-time.Second && d <= ago+5*time.Second
	}
	for i, w := range want {
		g := v.Nodes[i]
		if g.ID != w.id || g.Addr != w.addr || g.Live != w.live || g.Stopping != w.stopping || g.Shards != w.shards {
			t.Errorf("node %d: %+v, want %+v", i, g, w)
		}
		if !near(g.HeartbeatAtMs, w.heartbeatAgo) || !near(g.StartedAtMs, w.started) {
			t.Errorf("node %s: heartbeat %d ms and start %d ms before now, want about %s and %s",
				g.ID, v.NowMs-g.HeartbeatAtMs, v.NowMs-g.StartedAtMs, w.heartbeatAgo, w.started)
		}
	}

	type shard struct {
		owner      string
		epoch      int64
		expiresIn  time.Duration // relative to now; 0: never acquired (ExpiresAtMs 0)
		floor      int64
		belowFloor int
	}
	wantShards := []shard{
		{"a", 10, 8 * time.Second, 1000, 0},
		{"a", 11, 8 * time.Second, 2000, 0},
		{"a", 12, 8 * time.Second, 3000, 3},
		{"a", 13, 8 * time.Second, 4000, 0},
		{"b", 3, -20 * time.Second, 5000, 0},
		{"b", 3, -20 * time.Second, 6000, pgcluster.MaxRowsBelowFloorCounted},
		{"", 7, -time.Second, 7000, 0},
		{"", 0, 0, 8000, 0},
	}
	if len(v.Shards) != len(wantShards) {
		t.Fatalf("%d shards, want %d: %+v", len(v.Shards), len(wantShards), v.Shards)
	}
	for i, w := range wantShards {
		g := v.Shards[i]
		if g.Shard != i || g.Owner != w.owner || g.Epoch != w.epoch || g.FloorMs != w.floor || g.RowsBelowFloor != w.belowFloor {
			t.Errorf("shard %d: %+v, want %+v", i, g, w)
		}
		switch {
		case w.expiresIn == 0 && g.ExpiresAtMs != 0:
			t.Errorf("shard %d never acquired: expires at %d, want 0", i, g.ExpiresAtMs)
		case w.expiresIn != 0 && !near(g.ExpiresAtMs, -w.expiresIn):
			t.Errorf("shard %d: expires %d ms after now, want about %s", i, g.ExpiresAtMs-v.NowMs, w.expiresIn)
		}
	}

	// The TTL decides liveness: with 1s, only a's heartbeat (1s old, give or take the
	// statements' time) may still count, b's and c's do not.
	v, err = st.ClusterView(ctx, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if v.Nodes[1].Live || v.Nodes[2].Live {
		t.Fatalf("with a TTL of 1.5s, nodes b and c (heartbeats 30s and 2s old) are live: %+v", v.Nodes)
	}
}

// An empty cluster (no node has started yet) is a view with every shard and no node.
func TestClusterViewEmpty(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	st := openCluster(t, dsn, &pgstore.Options{Shards: 4}, nil)
	v, err := st.ClusterView(context.Background(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Nodes) != 0 || len(v.Shards) != 4 || v.Shards[3].Shard != 3 || v.Shards[3].Owner != "" || v.Shards[3].ExpiresAtMs != 0 {
		t.Fatalf("%+v", v)
	}
}

// The rows below the floors are counted by worker 0's alarm only (RowsBelowFloor, after a sweep
// at most every 10 s), never by a view: a count reads every index entry below the floors, the
// dead ones of the rows rendered since the last vacuum included, and a view is read at its
// readers' rate (the console's overview every second, each scrape, each `freshqctl top`
// refresh), so that a reader at one view a second or a hundred costs the schedule nothing. The
// views report the last count and when it was taken (RowsBelowFloorAtMs ≤ NowMs), and every view
// runs the same statements however many are read: none reads the schedule.
func TestClusterViewReadersNeverCount(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	tr := &viewStatements{}
	st := openCluster(t, dsn, &pgstore.Options{Shards: 4, TestTracer: tr}, nil)
	db := rawPool(t, dsn)
	exec := execer(t, db)
	exec(`UPDATE freshq_floor SET floor_ms = 5000`)
	below := 0
	fileBelow := func() {
		t.Helper()
		below++
		exec(`INSERT INTO freshq_schedule (cache_key, shard, due_at_ms, flags, effective_interval_ms, stored_interval_ms)
			VALUES (convert_to('below' || $1::int, 'UTF8'), 1, 10, 0, 0, 0)`, below)
	}
	// views reads k views, from 4 readers at once, as fast as they are answered, and checks each
	// reports want rows below shard 1's floor counted at atMs; it returns the statements they ran.
	views := func(step string, k int, want int, atMs int64) (all, counts int64) {
		t.Helper()
		all0, counts0 := tr.all.Load(), tr.counts.Load()
		var wg sync.WaitGroup
		errs := make(chan error, k)
		for r := range 4 {
			wg.Go(func() {
				for i := r; i < k; i += 4 {
					v, err := st.ClusterView(context.WithValue(context.Background(), viewKey{}, true), 10*time.Second)
					if err == nil && (v.Shards[1].RowsBelowFloor != want || v.RowsBelowFloorAtMs != atMs || v.RowsBelowFloorAtMs > v.NowMs) {
						err = fmt.Errorf("shard 1: %d rows below its floor counted at %d (the view's now %d), want %d counted at %d",
							v.Shards[1].RowsBelowFloor, v.RowsBelowFloorAtMs, v.NowMs, want, atMs)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%s: %v", step, err)
		}
		return tr.all.Load() - all0, tr.counts.Load() - counts0
	}
	count := func(step string, limit, want int) int64 {
		t.Helper()
		counts0 := tr.counts.Load()
		n, err := st.RowsBelowFloor(limit)
		if err != nil {
			t.Fatal(err)
		}
		if n != want || tr.counts.Load()-counts0 != 1 {
			t.Fatalf("%s: the alarm's count is %d in %d statements, want %d in one", step, n, tr.counts.Load()-counts0, want)
		}
		v, err := st.ClusterView(context.Background(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if v.RowsBelowFloorAtMs <= 0 || v.RowsBelowFloorAtMs > v.NowMs {
			t.Fatalf("%s: counted at %d, the next view's now %d", step, v.RowsBelowFloorAtMs, v.NowMs)
		}
		return v.RowsBelowFloorAtMs
	}

	fileBelow()
	fileBelow()
	one, counts := views("before any count", 1, 0, 0)
	if counts != 0 {
		t.Fatalf("before any count: a view counted the rows below the floors (%d statements)", counts)
	}
	many, counts := views("a hundred views before any count", 100, 0, 0)
	if counts != 0 || many != 100*one {
		t.Fatalf("a hundred views before any count ran %d statements (%d of them counts), want %d as one view's %d, none a count",
			many, counts, 100*one, one)
	}
	at := count("the alarm counts", 10_000, 2)
	fileBelow()
	many, counts = views("a hundred views after the count", 100, 2, at)
	if counts != 0 || many != 100*one {
		t.Fatalf("a hundred views after the count ran %d statements (%d of them counts), want %d, none a count", many, counts, 100*one)
	}
	at2 := count("the alarm counts again, up to its limit", 2, 2)
	if at2 < at {
		t.Fatalf("the second count is at %d, before the first's %d", at2, at)
	}
	views("views after the second count", 8, 3, at2)
}

// Views read at once are read one at a time: readers, however many, hold at most one of the
// store's connections (one view's transaction), and leave the others to the queue.
func TestClusterViewsOneAtATime(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	tr := &viewStatements{}
	st := openCluster(t, dsn, &pgstore.Options{Shards: 4, TestTracer: tr}, nil)
	ctx := context.WithValue(context.Background(), viewKey{}, true)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if _, err := st.ClusterView(ctx, 10*time.Second); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := tr.maxOpen.Load(); n != 1 {
		t.Fatalf("8 readers at once had %d views' transactions open at once, want 1", n)
	}
}

// viewKey marks the context of the statements of the views a test reads.
type viewKey struct{}

// viewStatements counts the statements the views marked with viewKey start (all) and the most
// of their transactions open at once (maxOpen), and every count of the rows below the floors,
// whoever runs it (counts).
type viewStatements struct{ all, counts, open, maxOpen atomic.Int64 }

func (s *viewStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if ctx.Value(viewKey{}) != nil {
		s.all.Add(1)
		switch sql := strings.ToLower(d.SQL); {
		case strings.HasPrefix(sql, "begin"):
			n := s.open.Add(1)
			for m := s.maxOpen.Load(); n > m && !s.maxOpen.CompareAndSwap(m, n); m = s.maxOpen.Load() {
			}
		case strings.HasPrefix(sql, "rollback"):
			s.open.Add(-1)
		}
	}
	if strings.Contains(d.SQL, "due_at_ms < f.floor_ms") {
		s.counts.Add(1)
	}
	return ctx
}

func (s *viewStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// execer returns a function that runs a statement on db and fails t if it errs: the tables
// written by SQL as the cluster's nodes would leave them.
func execer(t *testing.T, db *pgxpool.Pool) func(sql string, args ...any) {
	return func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(context.Background(), sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}
