package capacity

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// The farm of a cluster view is its live nodes that are not stopping, each with the figures it
// published when they decode (unknown otherwise), at the view's clock.
func TestFarmOfAClusterView(t *testing.T) {
	v := &store.ClusterView{NowMs: 9_000, Nodes: []store.ClusterNode{
		{ID: "a", Live: true, Capacity: []byte(`{"capacity_per_second": 2, "renders": 10}`)},
		{ID: "b", Live: true, Capacity: []byte(`not json`)},
		{ID: "c", Live: true},
		{ID: "d", Live: true, Stopping: true, Capacity: []byte(`{"capacity_per_second": 50}`)},
		{ID: "e", Capacity: []byte(`{"capacity_per_second": 70}`)},
	}}
	boosts := 0
	f := FarmOf(func() float64 { boosts++; return 1 })(v)
	if f.Nodes != 3 || f.Reporting != 1 || !slices.Equal(f.Unknown, []string{"b", "c"}) || f.NowMs != 9_000 || boosts != 1 {
		t.Fatalf("farm %+v (boost read %d times); want nodes a, b, c, of which a reporting, at 9000, the boost read once", f, boosts)
	}
	if f.Capacity.Capacity.PerSecond != 2 {
		t.Fatalf("farm capacity %v/s, want a's 2/s alone", f.Capacity.Capacity.PerSecond)
	}
}

// A node's published figures are its Figures as JSON.
func TestFiguresJSON(t *testing.T) {
	pol := testPolicy(t)
	svc := NewService(nil, func() *policy.Policy { return pol }, func() int64 { return 1_000 }, func() uint64 { return 4 }, zerolog.Nop())
	var back map[string]any
	if err := json.Unmarshal(svc.FiguresJSON(), &back); err != nil || back["backlog"] != float64(4) {
		t.Fatalf("figures %v (%v), want a JSON object with the backlog 4", back, err)
	}
}

// shardOwner is a cluster node's store for InCluster.
type shardOwner struct{ owned []int32 }

func (o shardOwner) ShardOf(key []byte) int32 { return int32(len(key)) }
func (o shardOwner) OwnedShards() []int32     { return o.owned }

// InCluster makes the service count the shards the node holds; without a cluster it counts none.
func TestInCluster(t *testing.T) {
	pol := testPolicy(t)
	svc := NewService(nil, func() *policy.Policy { return pol }, func() int64 { return 1_000 }, func() uint64 { return 0 }, zerolog.Nop())
	svc.InCluster(nil)
	if svc.Shards != nil {
		t.Fatal("a node alone counts shards")
	}
	svc.InCluster(shardOwner{owned: []int32{1, 5}})
	if svc.Shards == nil || svc.Shards() != 2 {
		t.Fatal("a cluster node does not count the shards it holds")
	}
}
