package capacity

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/wire"
)

// farmNodes are three nodes' published figures: a and b with demand and renders, c unknown
// (a node of an older version, or before its first heartbeat).
func farmNodes() []wire.FarmNode {
	a := &wire.NodeCapacity{Classes: []wire.DemandClass{
		{Lane: "submitted", Route: "home", Submitted: true, Rows: 1800, PerSecond: 0.5},
		{Lane: "discovered", Route: "product", Rows: 43200, PerSecond: 0.25},
	}, CapacityPerSecond: 0.6, RetryShare: 0.1, RecheckShare: 0, Renders: 540, WindowS: 900, Backlog: 10, RecountedAtMs: 2000, RecountDrift: 0.01}
	b := &wire.NodeCapacity{Classes: []wire.DemandClass{
		{Lane: "submitted", Route: "home", Submitted: true, Rows: 900, PerSecond: 0.25},
	}, CapacityPerSecond: 0.3, RecheckShare: 0.2, Renders: 270, WindowS: 880, Backlog: 5, RecountedAtMs: 1000, RecountDrift: 0.02}
	return []wire.FarmNode{{ID: "node-c"}, {ID: "node-b", Capacity: b}, {ID: "node-a", Capacity: a}}
}

// TestFarmSumsTheNodes: the farm's demand is the nodes' demands added class by class, its
// capacity the nodes' rates added, its retry and recheck shares weighted by each node's rate,
// its backlog the sum; a node whose figures are unknown is named and left out, not counted as
// 0; and the projection is Project's on the sum. Golden figures, worked by hand:
// demand 0.5 + 0.25 + 0.25 = 1 render/s (0.75 submitted, 0.25 discovered); capacity 0.9/s of
// which retries 0.06/s (a's tenth) and rechecks 0.06/s (b's fifth): 0.78/s for the cadences,
// 0.22/s short, 792 renders/h.
func TestFarmSumsTheNodes(t *testing.T) {
	f := Farm(farmNodes(), 2)
	if f.Nodes != 3 || f.Reporting != 2 || len(f.Unknown) != 1 || f.Unknown[0] != "node-c" {
		t.Fatalf("nodes %d reporting %d unknown %v, want 3, 2, [node-c]", f.Nodes, f.Reporting, f.Unknown)
	}
	if len(f.PerNode) != 3 || f.PerNode[0].ID != "node-a" || f.PerNode[2].Capacity != nil {
		t.Fatalf("per node %+v, want a, b, c (unknown) by id", f.PerNode)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s %v, want %v", name, got, want)
		}
	}
	near("demand", f.Demand.Total, 1)
	near("demand submitted", f.Demand.ByLane["submitted"], 0.75)
	near("demand discovered", f.Demand.ByLane["discovered"], 0.25)
	near("demand home", f.Demand.ByRoute["home"], 0.75)
	if f.Demand.Rows != 45900 || f.Capacity.Capacity.Renders != 810 || f.Projection.Backlog != 15 {
		t.Errorf("rows %d renders %d backlog %d, want 45900, 810, 15", f.Demand.Rows, f.Capacity.Capacity.Renders, f.Projection.Backlog)
	}
	near("capacity", f.Capacity.Capacity.PerSecond, 0.9)
	near("retry share", f.Capacity.Capacity.RetryShare, 0.06/0.9)
	near("recheck share", f.Capacity.Capacity.RecheckShare, 0.06/0.9)
	near("cadence capacity", f.Projection.CadenceCapacity, 0.78)
	near("surplus", f.Projection.SurplusPerHour, -792)
	if f.Projection.Verdict != "falling behind by 792 renders/h" || f.Projection.DrainSeconds != -1 {
		t.Errorf("verdict %q drain %v", f.Projection.Verdict, f.Projection.DrainSeconds)
	}
	// Both lanes are rendered at one score S: submitted at lateness S/2, discovered at S, and
	// the renders they take fill the cadences' capacity: 0.75/(1+S/2) + 0.25/(1+S) = 0.78.
	s := f.Projection.ByLane["discovered"] - 1
	near("submitted lateness", f.Projection.ByLane["submitted"]-1, s/2)
	near("renders taken", 0.75/(1+s/2)+0.25/(1+s), 0.78)
	if f.RecountedAtMs != 1000 || math.Abs(f.RecountDrift-0.03) > 1e-12 || f.Capacity.Capacity.WindowS != 900 {
		t.Errorf("recounted %d drift %v window %v, want the oldest (1000), the sum (0.03), the longest (900)", f.RecountedAtMs, f.RecountDrift, f.Capacity.Capacity.WindowS)
	}
	// The same figures in another order give the same sums, to the bit: every node that reads
	// them answers the same farm.
	nodes := farmNodes()
	nodes[0], nodes[2] = nodes[2], nodes[0]
	if g := Farm(nodes, 2); g.Demand.Total != f.Demand.Total || g.Projection.ByLane["submitted"] != f.Projection.ByLane["submitted"] {
		t.Errorf("another order: %v %v", g.Demand.Total, g.Projection.ByLane)
	}
}

// TestFarmOfOneNodeIsItsOwnView: a farm of one node projects what the node's own view does.
func TestFarmOfOneNodeIsItsOwnView(t *testing.T) {
	pol := testPolicy(t)
	s := NewService(nil, func() *policy.Policy { return pol }, func() int64 { return 1_700_000_000_000 }, func() uint64 { return 7 }, zerolog.Nop())
	for i := range 30 {
		sch, _ := store.NewSchedule([]byte(fmt.Sprintf("desktop|https://example.test/c/%d", i)), 1, i%3 == 0, 0, store.Lanes{})
		s.Ledger.Put(sch.Key(), rowOf(sch), nil)
	}
	for i := range int64(50) {
		s.Meter.Record(1_700_000_000_000-i*1000, KindCadence)
	}
	own, fig := s.View(), s.Figures()
	f := Farm([]wire.FarmNode{{ID: "solo", Capacity: &fig}}, pol.Boost())
	if f.Demand.Total != own.Demand.Total || f.Capacity.Capacity.PerSecond != own.Capacity.PerSecond || f.Projection.Verdict != own.Projection.Verdict ||
		f.Projection.ByLane["submitted"] != own.Projection.ByLane["submitted"] || f.Projection.Backlog != 7 {
		t.Fatalf("farm of one %+v\nits own view %+v", f.Capacity, own)
	}
}

// shardOf is a test's shard of a key over n shards.
func shardOf(n int) func([]byte) int32 {
	return func(k []byte) int32 {
		h := fnv.New32a()
		h.Write(k)
		return int32(h.Sum32() % uint32(n))
	}
}

// TestShardedDemandAddsUp: three ledgers that each saw every write but hold a third of the
// shards report demands that add up to the demand of one ledger of every shard: every shard
// counted once.
func TestShardedDemandAddsUp(t *testing.T) {
	pol := testPolicy(t)
	const shards = 8
	all := NewLedger(func() *policy.Policy { return pol })
	var nodes [3]*Ledger
	for i := range nodes {
		nodes[i] = NewLedger(func() *policy.Policy { return pol })
		var held []int32
		for sh := int32(i); sh < shards; sh += 3 {
			held = append(held, sh)
		}
		nodes[i].SetShards(shardOf(shards), func() []int32 { return held })
	}
	for i := range 300 {
		path := []string{"/", "/c/%d", "/p/%d", "/blog/%d"}[i%4]
		if i%4 != 0 {
			path = fmt.Sprintf(path, i)
		}
		sch, _ := store.NewSchedule([]byte("desktop|https://example.test"+path+fmt.Sprint("?", i)), 1, i%2 == 0, 0, store.Lanes{Failing: i%7 == 0})
		for _, l := range append(nodes[:], all) {
			l.Put(sch.Key(), rowOf(sch), nil)
		}
	}
	want := all.Demand()
	var sum float64
	var rows int64
	for _, l := range nodes {
		d := l.Demand()
		if d.Rows == 0 || d.Rows == want.Rows {
			t.Fatalf("a node's demand counts %d rows of %d: not its third", d.Rows, want.Rows)
		}
		sum += d.Total
		rows += d.Rows
	}
	if rows != want.Rows || math.Abs(sum-want.Total) > 1e-12 {
		t.Fatalf("nodes' demands add up to %v (%d rows), want %v (%d rows)", sum, rows, want.Total, want.Rows)
	}
}

// shardedSource is a ShardedSource over a Badger store: it reads the rows of the shards held,
// counting its calls, and never reads a target by itself (GetTarget fails the test).
type shardedSource struct {
	t     *testing.T
	st    *badgerstore.Store
	shard func([]byte) int32
	held  []int32
	calls int
}

func (s *shardedSource) ForEachSchedule(prefix []byte, fn func([]byte, store.Row) error) error {
	s.t.Fatal("a sharded recount read every row")
	return nil
}

func (s *shardedSource) GetTarget(key []byte) (store.Target, error) {
	s.t.Fatal("a sharded recount read a target per row")
	return store.Target{}, nil
}

func (s *shardedSource) ForEachOwnedRow(ctx context.Context, fn func([]byte, store.Row, *store.Target) error) ([]int32, error) {
	s.calls++
	err := s.st.ForEachSchedule(nil, func(k []byte, r store.Row) error {
		sh := s.shard(k)
		for _, h := range s.held {
			if h == sh {
				t, err := s.st.GetTarget(k)
				if err != nil {
					return fn(k, r, nil)
				}
				return fn(k, r, &t)
			}
		}
		return nil
	})
	return s.held, err
}

// TestShardedRecount: a node's recount from a ShardedSource reads its shards once (one call),
// rebuilds their demand, drops the rows of shards it does not hold (written through it for
// another node's shard), and measures the drift over its own shards only.
func TestShardedRecount(t *testing.T) {
	pol := testPolicy(t)
	raw := openStore(t)
	held := []int32{0, 2}
	l := NewLedger(func() *policy.Policy { return pol })
	l.SetShards(shardOf(4), func() []int32 { return held })
	st := WrapStore(raw, l, nil)
	var ours, theirs int
	for i := range 40 {
		key := []byte(fmt.Sprintf("desktop|https://example.test/c/%d", i))
		sch, _ := store.NewSchedule(key, 1, true, 0, store.Lanes{})
		w := st
		if i%2 == 0 {
			w = raw // written through another node: this ledger did not see it
		}
		if err := w.WriteSchedule(sch); err != nil {
			t.Fatal(err)
		}
		switch sh := shardOf(4)(key); {
		case sh == 0 || sh == 2:
			ours++
		case i%2 == 1:
			theirs++
		}
	}
	if theirs == 0 || ours == 0 {
		t.Fatalf("the corpus puts %d rows in our shards, %d seen rows in theirs", ours, theirs)
	}
	src := &shardedSource{t: t, st: raw, shard: shardOf(4), held: held}
	d, err := l.Recount(src, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if src.calls != 1 || d.Rows != int64(ours) || l.Demand().Rows != int64(ours) {
		t.Fatalf("calls %d, recount %+v, demand rows %d: want 1 call and our %d rows", src.calls, d, l.Demand().Rows, ours)
	}
	// The drift is the rows of our shards written elsewhere, not the rows of theirs we saw; and
	// those are rows this ledger never saw (written through another node): no drift of its own.
	if d.RowsDiffering == 0 || d.RowsDiffering > int64(ours) || d.RowsUnseen != d.RowsDiffering {
		t.Fatalf("%d rows differing, %d unseen; want between 1 and our %d, all of them unseen", d.RowsDiffering, d.RowsUnseen, ours)
	}
	if n := len(l.rows); n != ours {
		t.Fatalf("the ledger keeps %d keys after the recount, want our shards' %d", n, ours)
	}
	// Taking every shard and recounting counts every row.
	held = []int32{0, 1, 2, 3}
	src.held = held
	if d, err := l.Recount(src, zerolog.Nop()); err != nil || d.Rows != 40 {
		t.Fatalf("every shard held: %+v %v, want 40 rows", d, err)
	}
}
