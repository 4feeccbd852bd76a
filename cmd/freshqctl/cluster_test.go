package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/freshq/freshq/wire"
)

// clusterView: three nodes on the database's clock at now; a holds 0-3 and 8-9 (shard 9 at
// another epoch, shard 2 with rows below its floor), b holds 4-5 and 10-11, c died (its
// heartbeat 40s old) and its lease of 6 expired; 7 was handed over. Shards 12-15: a again.
func clusterView() wire.ClusterView {
	const now = int64(1_800_000_000_000)
	v := wire.ClusterView{Self: "a", LeaseTTLMs: 10_000, NowMs: now,
		Nodes: []wire.ClusterNode{
			{ID: "a", Addr: "10.0.0.1:8420", StartedAtMs: now - 3_600_000, HeartbeatAtMs: now - 1_000, Live: true, Shards: 10},
			{ID: "b", Addr: "10.0.0.2:8420", StartedAtMs: now - 7_200_000, HeartbeatAtMs: now - 2_000, Live: true, Stopping: true, Shards: 4},
			{ID: "c", Addr: "10.0.0.3:8420", StartedAtMs: now - 90_000_000, HeartbeatAtMs: now - 40_000, Live: false, Shards: 0},
		}}
	owner := []string{"a", "a", "a", "a", "b", "b", "c", "", "a", "a", "b", "b", "a", "a", "a", "a"}
	for i, o := range owner {
		s := wire.ClusterShard{Shard: i, Owner: o, Epoch: 3, ExpiresAtMs: now + 8_000, FloorMs: now - 300_000}
		switch i {
		case 2:
			s.RowsBelowFloor = 7
		case 6:
			s.ExpiresAtMs = now - 30_000
		case 7:
			s.Epoch, s.ExpiresAtMs = 5, now-1_000
		case 9:
			s.Epoch, s.FloorMs = 6, now-240_000
		}
		v.Shards = append(v.Shards, s)
	}
	return v
}

func TestCluster(t *testing.T) {
	body, _ := json.Marshal(clusterView())
	f := newFake(t, map[string]http.HandlerFunc{"GET /v1/cluster": reply(200, string(body))})
	r := at(t, f.srv, "cluster")
	wantExit(t, r, 0, "")
	want := `cluster seen from a at 2027-01-15 08:00:00Z (the database's clock)

NODE  ADDR           LIVE           HEARTBEAT  STARTED  SHARDS
a     10.0.0.1:8420  yes            1s ago     1h ago   10
b     10.0.0.2:8420  yes, stopping  2s ago     2h ago   4
c     10.0.0.3:8420  NO             40s ago    25h ago  0

16 shards (lease TTL 10s): 1 with nobody, 1 lease expired, 7 rows below floor
rows below their shard's floor are never rendered: anything but 0 is a bug
OWNER        SHARDS  EPOCH  FLOOR             BELOW FLOOR
a            0-3     3      5m ago            7
             8-9     3-6    5m ago .. 4m ago  0
             12-15   3      5m ago            0
b            4-5     3      5m ago            0
             10-11   3      5m ago            0
c (expired)  6       3      5m ago            0
(nobody)     7       5      5m ago            0
`
	if r.stdout != want {
		t.Fatalf("got\n%s\nwant\n%s", r.stdout, want)
	}
	fits(t, r.stdout)

	r = at(t, f.srv, "cluster", "--json")
	var v wire.ClusterView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Self != "a" || len(v.Shards) != 16 {
		t.Fatalf("--json: %v %+v", err, v)
	}
}

// Badger's 404 reads as the server's own error, on one line, exit 1.
func TestClusterOnBadger(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{"GET /v1/cluster": reply(404,
		`{"error":"this node is not in a cluster (store.backend is badger)","field":"store.backend"}`)})
	wantExit(t, at(t, f.srv, "cluster"), 1, "not in a cluster (store.backend is badger)")
}

// A shard list in any order, with odd values, prints sorted and never panics.
func TestClusterOddViews(t *testing.T) {
	v := clusterView()
	v.Shards[0], v.Shards[15] = v.Shards[15], v.Shards[0]
	v.Shards = append(v.Shards, wire.ClusterShard{Shard: -1, Owner: "zz", FloorMs: -5}, wire.ClusterShard{Shard: 1 << 40})
	v.Nodes = append(v.Nodes, wire.ClusterNode{ID: strings.Repeat("x", 30)})
	body, _ := json.Marshal(v)
	f := newFake(t, map[string]http.HandlerFunc{"GET /v1/cluster": reply(200, string(body))})
	r := at(t, f.srv, "cluster")
	wantExit(t, r, 0, "")
	if !regexp.MustCompile(`\na +0-3 +3 `).MatchString(r.stdout) {
		t.Fatalf("unsorted shards not sorted:\n%s", r.stdout)
	}
	for _, empty := range []string{`{}`, `{"shards":null,"nodes":null}`} {
		f := newFake(t, map[string]http.HandlerFunc{"GET /v1/cluster": reply(200, empty)})
		if r := at(t, f.srv, "cluster"); r.code != 0 {
			t.Fatalf("%s: %+v", empty, r)
		}
	}
}
