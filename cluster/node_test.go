package cluster_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	. "github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/cluster/clustertest"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// fakeEngine is an Engine over a MemRegistry: the shards the node was given (SetOwned), the
// figures each heartbeat carried, the pages present and a fixed view.
type fakeEngine struct {
	*clustertest.MemRegistry
	mu      sync.Mutex
	owned   [][]int32
	figures []string
	present [][]byte
	view    store.ClusterView
}

func (e *fakeEngine) HeartbeatFigures(ctx context.Context, id, inc string, figures []byte) error {
	e.mu.Lock()
	e.figures = append(e.figures, string(figures))
	e.mu.Unlock()
	return e.MemRegistry.Heartbeat(ctx, id, inc)
}
func (e *fakeEngine) Shards() int              { return testShards }
func (e *fakeEngine) ShardOf(key []byte) int32 { return int32(len(key) % testShards) }
func (e *fakeEngine) SetOwned(_ context.Context, shards []int32, _ []int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.owned = append(e.owned, slices.Clone(shards))
	return nil
}
func (e *fakeEngine) OwnedShards() []int32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.owned) == 0 {
		return nil
	}
	return slices.Clone(e.owned[len(e.owned)-1])
}
func (e *fakeEngine) PublishPauses(context.Context, []string, []int64, []int32) error { return nil }
func (e *fakeEngine) ReadPauses(context.Context) ([]string, []int64, []int32, int64, error) {
	return nil, nil, nil, 0, nil
}
func (e *fakeEngine) PublishConfirm(context.Context, store.FarmConfirm) error { return nil }
func (e *fakeEngine) ReadConfirms(context.Context) ([]store.FarmConfirm, int64, error) {
	return nil, 0, nil
}
func (e *fakeEngine) PagesPresent(_ context.Context, keys [][]byte) ([][]byte, error) {
	var out [][]byte
	for _, k := range keys {
		if slices.ContainsFunc(e.present, func(p []byte) bool { return string(p) == string(k) }) {
			out = append(out, k)
		}
	}
	return out, nil
}
func (e *fakeEngine) ClusterView(context.Context, time.Duration) (store.ClusterView, error) {
	return e.view, nil
}

var _ Engine = (*fakeEngine)(nil)

func testSegment(t *testing.T, epochMs int64) *shm.Segment {
	t.Helper()
	seg, err := shm.Create(filepath.Join(t.TempDir(), "seg"), shm.Options{Workers: 1, EpochMs: epochMs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	return seg
}

// A node whose store offers no cluster capability has no Member, and grants with no fence.
func TestNodeMemberWithoutEngine(t *testing.T) {
	seg := testSegment(t, 1_800_000_000_000)
	seg.Fence().SetGrantUntil(1)
	w, _ := seg.Worker(0)
	if m := NewNodeMember(nil, NodeOptions{ID: "a", TTL: 10 * time.Second, Seg: seg, Worker: w, Now: time.Now, Log: zerolog.Nop()}); m != nil {
		t.Fatal("a Member without an engine")
	}
	if _, until := seg.Fence().Load(); until != 0 {
		t.Fatalf("grantUntil %d without a cluster, want 0 (no fence)", until)
	}
}

// A node's Member on its engine hands the store the shards it holds, publishes the node's
// figures with every heartbeat, and asks for a recount only when the shards it holds change.
func TestNodeMemberPublishesFiguresAndRecountsOnShardChange(t *testing.T) {
	eng := &fakeEngine{MemRegistry: clustertest.NewMemRegistry(testShards, time.UnixMilli(1_800_000_000_000))}
	seg := testSegment(t, eng.Now().UnixMilli())
	w, _ := seg.Worker(0)
	var recounts int
	var members []string
	m := NewNodeMember(eng, NodeOptions{ID: "node-a", Addr: "a:1", TTL: time.Hour, Seg: seg, Worker: w, Now: eng.Now, Log: zerolog.Nop(),
		Members: func(me string, live []string, _ time.Time) { members = live },
		Figures: func() []byte { return []byte(`{"renders":7}`) },
		Recount: func() { recounts++ }})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if got := eng.OwnedShards(); len(got) != testShards {
		t.Fatalf("a node alone holds %d shards, want every one of %d", len(got), testShards)
	}
	if recounts != 1 || len(eng.figures) != 1 || eng.figures[0] != `{"renders":7}` || !slices.Equal(members, []string{"node-a"}) {
		t.Fatalf("after the first tick: %d recounts, figures %q, members %q; want 1, the node's, node-a", recounts, eng.figures, members)
	}
	m.Tick(ctx)
	if recounts != 1 || len(eng.figures) != 2 {
		t.Fatalf("a tick that moved no shard: %d recounts (want still 1), %d heartbeats with figures (want 2)", recounts, len(eng.figures))
	}
	// A second node joins: node-a hands it the shards it wins.
	if err := eng.Register(ctx, "node-b", "b:1", "1", time.Hour); err != nil {
		t.Fatal(err)
	}
	m.Tick(ctx)
	if held := eng.OwnedShards(); recounts != 2 || len(held) == testShards || len(held) == 0 {
		t.Fatalf("after node-b joined: node-a holds %d shards, %d recounts; want some shards handed over and a second recount", len(held), recounts)
	}
}

// The miss watch exists only on an engine, and asks it which pages are present every
// MissWatchPeriod.
func TestMissWatch(t *testing.T) {
	if NewMissWatch(nil, nil) != nil {
		t.Fatal("a miss watch without an engine")
	}
	eng := &fakeEngine{MemRegistry: clustertest.NewMemRegistry(testShards, time.Now()), present: [][]byte{[]byte("k1")}}
	got := make(chan [][]byte, 1)
	w := NewMissWatch(eng, waitersFunc(func(ctx context.Context, period time.Duration, present func(context.Context, [][]byte) ([][]byte, error)) {
		if period != MissWatchPeriod {
			t.Errorf("period %v, want %v", period, MissWatchPeriod)
		}
		keys, _ := present(ctx, [][]byte{[]byte("k1"), []byte("k2")})
		got <- keys
		<-ctx.Done()
	}))
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if keys := <-got; len(keys) != 1 || string(keys[0]) != "k1" {
		t.Fatalf("present %q, want the engine's k1", keys)
	}
	w.Stop()
}

type waitersFunc func(ctx context.Context, period time.Duration, present func(context.Context, [][]byte) ([][]byte, error))

func (f waitersFunc) Watch(ctx context.Context, period time.Duration, present func(context.Context, [][]byte) ([][]byte, error)) {
	f(ctx, period, present)
}

// The view for people is the engine's, with the node's identity, the TTL and the farm's
// capacity; none without an engine.
func TestStatusView(t *testing.T) {
	if StatusView(nil, "a", time.Second, nil) != nil {
		t.Fatal("a cluster view without an engine")
	}
	eng := &fakeEngine{MemRegistry: clustertest.NewMemRegistry(testShards, time.Now()), view: store.ClusterView{NowMs: 5_000, RowsBelowFloorAtMs: 4_000,
		Nodes:  []store.ClusterNode{{ID: "a", Addr: "a:1", StartedAtMs: 1, HeartbeatAtMs: 2, Live: true, Shards: 3, Capacity: []byte(`{}`)}},
		Shards: []store.ClusterShard{{Shard: 0, Owner: "a", Epoch: 4, ExpiresAtMs: 6_000, FloorMs: 7, RowsBelowFloor: 1}}}}
	farm := &wire.FarmCapacity{Nodes: 1}
	var farmOf *store.ClusterView
	v, err := StatusView(eng, "a", 2*time.Second, func(cv *store.ClusterView) *wire.FarmCapacity { farmOf = cv; return farm })(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := wire.ClusterView{Self: "a", LeaseTTLMs: 2000, NowMs: 5_000, RowsBelowFloorAtMs: 4_000,
		Nodes:  []wire.ClusterNode{{ID: "a", Addr: "a:1", StartedAtMs: 1, HeartbeatAtMs: 2, Live: true, Shards: 3}},
		Shards: []wire.ClusterShard{{Shard: 0, Owner: "a", Epoch: 4, ExpiresAtMs: 6_000, FloorMs: 7, RowsBelowFloor: 1}}, Farm: farm}
	if farmOf == nil || farmOf.NowMs != 5_000 || v.Self != want.Self || v.LeaseTTLMs != want.LeaseTTLMs || v.NowMs != want.NowMs ||
		v.RowsBelowFloorAtMs != want.RowsBelowFloorAtMs || !slices.Equal(v.Nodes, want.Nodes) || !slices.Equal(v.Shards, want.Shards) || v.Farm != farm {
		t.Fatalf("view %+v, want %+v", v, want)
	}
}
