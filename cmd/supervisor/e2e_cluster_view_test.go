package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

// A node on PostgreSQL answers GET /v1/cluster through the supervisor with the database's view
// (itself, the lease TTL, every shard with its floor), and /v1/queue carries its cluster section.
func TestClusterViewEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	be := postgresFor(t)
	n := startNode(t, dir, 2, be.yaml+"node: {id: view-a}\ncluster: {lease_ttl: 4s}\nrender: {renderer: sim}\n", "")
	waitReady(t, n)

	// A node alone holds every shard, once it has taken them (at its first ticks), and its
	// worker 0 counts the rows below the floors after its first sweep (the view only reports it).
	var v wire.ClusterView
	waitFor(t, "the node to hold every shard, its rows below the floors counted", 30*time.Second, func() bool {
		a := n.do(http.MethodGet, wire.PathCluster, "", nil)
		v = wire.ClusterView{}
		if a.code != http.StatusOK || json.Unmarshal(a.body, &v) != nil {
			t.Fatalf("GET /v1/cluster: %d %s", a.code, a.body)
		}
		return len(v.Nodes) == 1 && v.Nodes[0].Shards == 256 && v.RowsBelowFloorAtMs > 0
	})
	if v.Self != "view-a" || v.LeaseTTLMs != 4000 || len(v.Shards) != 256 {
		t.Fatalf("view: self %q, ttl %d ms, %d shards", v.Self, v.LeaseTTLMs, len(v.Shards))
	}
	if d := time.Since(time.UnixMilli(v.NowMs)).Abs(); d > time.Minute {
		t.Fatalf("the database's now is %s away from this machine's", d)
	}
	if me := v.Nodes[0]; me.ID != "view-a" || me.Addr != n.addr || !me.Live || me.Stopping ||
		v.NowMs-me.HeartbeatAtMs > v.LeaseTTLMs || me.StartedAtMs > me.HeartbeatAtMs {
		t.Fatalf("the node: %+v at %d", me, v.NowMs)
	}
	// The rows below the floors are counted by worker 0 after a sweep at most every 10 s, never
	// by a view; the view says when.
	if age := v.NowMs - v.RowsBelowFloorAtMs; v.RowsBelowFloorAtMs <= 0 || age < 0 || age > 15_000 {
		t.Fatalf("rows below the floors counted at %d, the view's now %d", v.RowsBelowFloorAtMs, v.NowMs)
	}
	for i, s := range v.Shards {
		if s.Shard != i || s.Owner != "view-a" || s.Epoch < 1 || s.ExpiresAtMs <= v.NowMs || s.RowsBelowFloor != 0 {
			t.Fatalf("shard %d: %+v at %d", i, s, v.NowMs)
		}
	}

	var q wire.QueueView
	a := n.do(http.MethodGet, "/v1/queue", "", nil)
	if a.code != http.StatusOK || json.Unmarshal(a.body, &q) != nil || q.Cluster == nil || q.Cluster.Node != "view-a" ||
		q.Cluster.Error != "" || q.Cluster.ShardsOwned != 256 || len(q.Cluster.Shards) != 256 {
		t.Fatalf("GET /v1/queue: %d %s", a.code, a.body)
	}

	// /metrics: the shards held, from shared memory, and each one's series, from the view.
	waitFor(t, "the shard series in /metrics", 10*time.Second, func() bool {
		m := n.metrics()
		return m["freshq_cluster_shards_owned"] == 256 && m[`freshq_shard_epoch{shard="255"}`] >= 1 &&
			m[`freshq_shard_floor_timestamp_seconds{shard="0"}`] > 0
	})
	m := n.metrics()
	for _, name := range []string{`freshq_shard_rows_below_floor{shard="7"}`, "freshq_grants_fenced_total", "freshq_results_fenced_total"} {
		if v, ok := m[name]; !ok || v != 0 {
			t.Errorf("%s: %v (present: %v), want 0", name, v, ok)
		}
	}
}

// On Badger there is no cluster: /v1/cluster is a 404 naming store.backend, /v1/queue has no
// cluster section, /metrics no shard series.
func TestClusterViewOnBadgerEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	n := startNode(t, dir, 2, "render: {renderer: sim}\n", "")
	waitReady(t, n)
	n.do(http.MethodGet, wire.PathCluster, "", nil).jsonError(t, "GET /v1/cluster on Badger", http.StatusNotFound, "store.backend")
	var q map[string]any
	a := n.do(http.MethodGet, "/v1/queue", "", nil)
	if a.code != http.StatusOK || json.Unmarshal(a.body, &q) != nil {
		t.Fatalf("GET /v1/queue: %d %s", a.code, a.body)
	}
	if _, ok := q["cluster"]; ok {
		t.Fatalf("/v1/queue on Badger has a cluster section: %s", a.body)
	}
	if _, ok := n.metrics()["freshq_cluster_shards_owned"]; ok {
		t.Fatal("/metrics on Badger has freshq_cluster_shards_owned")
	}
}
