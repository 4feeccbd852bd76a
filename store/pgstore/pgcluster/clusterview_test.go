package pgcluster_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freshq/freshq/store"
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

// The view counts the rows below each shard's floor at most once per BelowFloorRecount of the
// store's clock, and says when it counted (on the database's clock, as the view's NowMs): a
// count reads every index entry below the floor, the dead ones of rows rendered since the last
// vacuum included, and a scrape or a `freshqctl top` refresh asks for the view every few seconds.
func TestClusterViewCountsBelowFloorOncePerInterval(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	st := openCluster(t, dsn, &pgstore.Options{Shards: 4}, &pgcluster.Options{BelowFloorRecount: 10 * time.Second,
		Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	db := rawPool(t, dsn)
	ctx := context.Background()
	exec := execer(t, db)
	exec(`UPDATE freshq_floor SET floor_ms = 5000`)
	below := 0
	fileBelow := func() {
		t.Helper()
		below++
		exec(`INSERT INTO freshq_schedule (cache_key, shard, due_at_ms, flags, effective_interval_ms, stored_interval_ms)
			VALUES (convert_to('below' || $1::int, 'UTF8'), 1, 10, 0, 0, 0)`, below)
	}
	view := func(step string, wantBelow int, counted bool, lastCountMs int64) store.ClusterView {
		t.Helper()
		v, err := st.ClusterView(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wantAt := lastCountMs
		if counted {
			wantAt = v.NowMs
		}
		if got := v.Shards[1].RowsBelowFloor; got != wantBelow || v.RowsBelowFloorAtMs != wantAt {
			t.Fatalf("%s: shard 1 has %d rows below its floor counted at %d, want %d at %d (the view's now %d)",
				step, got, v.RowsBelowFloorAtMs, wantBelow, wantAt, v.NowMs)
		}
		return v
	}

	fileBelow()
	fileBelow()
	first := view("the first view", 2, true, 0)
	fileBelow()
	clock.Add(10_000 - 1)
	view("just short of the interval", 2, false, first.NowMs)
	clock.Add(1)
	view("the interval has passed", 3, true, 0)
	fileBelow()
	clock.Add(-1)
	view("the clock went back", 4, true, 0)

	// Views at once, some of them counting as the clock moves on, all read the one count.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 10 {
				clock.Add(3_000)
				v, err := st.ClusterView(ctx, 10*time.Second)
				if err == nil && (v.Shards[1].RowsBelowFloor != 4 || v.RowsBelowFloorAtMs <= 0 || v.RowsBelowFloorAtMs > v.NowMs) {
					err = fmt.Errorf("shard 1: %d rows below its floor counted at %d, the view's now %d: want 4, counted no later than now", v.Shards[1].RowsBelowFloor, v.RowsBelowFloorAtMs, v.NowMs)
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
		t.Fatal(err)
	}
}

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
