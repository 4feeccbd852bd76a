package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// getJSON answers GET path on mux: the status and the decoded body.
func getJSON(t *testing.T, mux *http.ServeMux, path string, v any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q", path, ct)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, rec.Body)
	}
	return rec.Code
}

// clusterFixture: node a holds shards 0 and 2 (shard 2 with rows below its floor), its lease
// of shard 3 expired (it names a, but a holds it no more), b holds shard 1.
var clusterFixture = wire.ClusterView{
	Self: "a", LeaseTTLMs: 10_000, NowMs: 1_000_000, RowsBelowFloorAtMs: 995_000,
	Nodes: []wire.ClusterNode{
		{ID: "a", Addr: "10.0.0.1:8420", HeartbeatAtMs: 999_000, Live: true, Shards: 2},
		{ID: "b", Addr: "10.0.0.2:8420", HeartbeatAtMs: 998_000, Live: true, Shards: 1},
	},
	Shards: []wire.ClusterShard{
		{Shard: 0, Owner: "a", Epoch: 4, ExpiresAtMs: 1_008_000, FloorMs: 500},
		{Shard: 1, Owner: "b", Epoch: 9, ExpiresAtMs: 1_007_000, FloorMs: 600, RowsBelowFloor: 5},
		{Shard: 2, Owner: "a", Epoch: 7, ExpiresAtMs: 1_008_000, FloorMs: 700, RowsBelowFloor: 3},
		{Shard: 3, Owner: "a", Epoch: 2, ExpiresAtMs: 1_000_000, FloorMs: 800, RowsBelowFloor: 11},
	},
	Farm: farmFixture(),
}

// farmFixture is a farm of a (figures published) and b (unknown), as cmd/worker sums it.
func farmFixture() *wire.FarmCapacity {
	f := &wire.FarmCapacity{Nodes: 2, Reporting: 1, Unknown: []string{"b"}, PerNode: []wire.FarmNode{
		{ID: "a", Capacity: &wire.NodeCapacity{Shards: 2, DemandPerSecond: 0.5, DemandRows: 1800, CapacityPerSecond: 0.4,
			Classes: []wire.DemandClass{{Lane: "submitted", Route: "home", Submitted: true, Rows: 1800, PerSecond: 0.5}}}},
		{ID: "b"},
	}}
	f.Demand.Total, f.Capacity.Capacity.PerSecond, f.Projection.Verdict = 0.5, 0.4, "falling behind by 360 renders/h"
	return f
}

func TestClusterEndpoint(t *testing.T) {
	var calls int
	mux := http.NewServeMux()
	(&Cluster{View: func(context.Context) (wire.ClusterView, error) { calls++; return clusterFixture, nil }}).Register(mux)
	var v wire.ClusterView
	if code := getJSON(t, mux, wire.PathCluster, &v); code != http.StatusOK || !reflect.DeepEqual(v, clusterFixture) {
		t.Fatalf("%d %+v", code, v)
	}
	if calls != 1 {
		t.Fatalf("%d reads of the view", calls)
	}
}

// On Badger the node is in no cluster: 404, with the error saying so and naming the setting.
func TestClusterEndpointOnBadger(t *testing.T) {
	mux := http.NewServeMux()
	(&Cluster{}).Register(mux)
	var e wire.ErrorBody
	code := getJSON(t, mux, wire.PathCluster, &e)
	if code != http.StatusNotFound || e.Field != "store.backend" || e.Error != "this node is not in a cluster (store.backend is badger)" {
		t.Fatalf("%d %+v", code, e)
	}
}

// The database unreachable is worth a retry: 503, as every other store failure.
func TestClusterEndpointStoreFailure(t *testing.T) {
	mux := http.NewServeMux()
	(&Cluster{View: func(context.Context) (wire.ClusterView, error) {
		return wire.ClusterView{}, errors.New("pgstore: cluster view: connection refused")
	}}).Register(mux)
	var e wire.ErrorBody
	if code := getJSON(t, mux, wire.PathCluster, &e); code != http.StatusServiceUnavailable || e.Error == "" {
		t.Fatalf("%d %+v", code, e)
	}
}

// /v1/queue's cluster section is the node's own unexpired leases, not every lease that names it.
func TestQueueClusterSection(t *testing.T) {
	got := ownSection(clusterFixture)
	want := &wire.QueueCluster{Node: "a", ShardsOwned: 2, RowsBelowFloor: 3, RowsBelowFloorAtMs: 995_000, Shards: []wire.OwnedShard{
		{Shard: 0, Epoch: 4, FloorMs: 500},
		{Shard: 2, Epoch: 7, FloorMs: 700, RowsBelowFloor: 3},
	}, Capacity: farmFixture()}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v\nwant %+v", got, want)
	}
	if s := ownSection(wire.ClusterView{Self: "c", NowMs: 1}); s.ShardsOwned != 0 || s.Shards == nil {
		t.Fatalf("a node with no shard: %+v (shards must be [] on the wire, not null)", s)
	}
}

func TestQueueWithCluster(t *testing.T) {
	seg := qtest.New(t, "", start, shm.Options{}).Seg
	for _, c := range []struct {
		name string
		view func(context.Context) (wire.ClusterView, error)
		want func(*wire.QueueCluster) bool
	}{
		{"badger", nil, func(c *wire.QueueCluster) bool { return c == nil }},
		{"postgres", func(context.Context) (wire.ClusterView, error) { return clusterFixture, nil },
			func(c *wire.QueueCluster) bool {
				return c != nil && c.ShardsOwned == 2 && c.RowsBelowFloor == 3 && c.Error == ""
			}},
		{"database down", func(context.Context) (wire.ClusterView, error) { return wire.ClusterView{}, errors.New("down") },
			func(c *wire.QueueCluster) bool { return c != nil && c.Error != "" && c.Shards != nil }},
		// The read is bounded: a database that hangs does not hang /v1/queue with it.
		{"bounded", func(ctx context.Context) (wire.ClusterView, error) {
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= queueClusterTimeout {
				return wire.ClusterView{}, errors.New("bounded")
			}
			return clusterFixture, nil
		}, func(c *wire.QueueCluster) bool { return c != nil && c.Error == "bounded" }},
	} {
		mux := http.NewServeMux()
		(&Queue{Seg: seg, Now: func() int64 { return 1 }, Cluster: c.view}).Register(mux)
		var q wire.QueueView
		if code := getJSON(t, mux, "/v1/queue", &q); code != http.StatusOK || !c.want(q.Cluster) {
			t.Errorf("%s: %d %+v", c.name, code, q.Cluster)
		}
	}
}
