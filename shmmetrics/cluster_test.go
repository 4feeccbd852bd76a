package shmmetrics

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// clusterAt is a view in which node "a" holds shards 0 and 2; its lease of shard 3 expired
// (it still names a, who holds it no more) and b holds shard 1.
var clusterAt = wire.ClusterView{
	Self: "a", LeaseTTLMs: 10_000, NowMs: 1_000_000,
	Nodes: []wire.ClusterNode{{ID: "a", Live: true, Shards: 2}, {ID: "b", Live: true, Shards: 1}},
	Shards: []wire.ClusterShard{
		{Shard: 0, Owner: "a", Epoch: 4, ExpiresAtMs: 1_008_000, FloorMs: 500_000},
		{Shard: 1, Owner: "b", Epoch: 9, ExpiresAtMs: 1_007_000, FloorMs: 600_000, RowsBelowFloor: 5},
		{Shard: 2, Owner: "a", Epoch: 7, ExpiresAtMs: 1_008_000, FloorMs: 700_000, RowsBelowFloor: 3},
		{Shard: 3, Owner: "a", Epoch: 2, ExpiresAtMs: 1_000_000, FloorMs: 800_000, RowsBelowFloor: 11},
	},
}

// fixture is a collector over a segment of two workers, with store.backend as given, and a
// worker 0 on a unix socket (socket) answering /v1/cluster with view (nil: no worker 0
// listening).
type fixture struct {
	seg    *shm.Segment
	socket string
	c      *Collector
}

func metricsFixture(t *testing.T, backend string, view *wire.ClusterView) *fixture {
	t.Helper()
	dir, err := os.MkdirTemp("", "sv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	seg, err := shm.Create(filepath.Join(dir, "seg"), shm.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	cfg := config.Default()
	cfg.Store.Backend = backend
	f := &fixture{seg: seg, socket: filepath.Join(dir, "w0.sock")}
	f.c, err = New(Options{
		Segment:    seg,
		Workers:    2,
		Clustered:  func() bool { return cfg.Store.Backend == config.StoreBackendPostgres },
		HostLimits: func() hosts.Limits { return assemble.HostsLimits(cfg.Render.Hosts, cfg.Render.Domains...) },
		Worker0:    wire.NewClient(f.socket),
	})
	if err != nil {
		t.Fatal(err)
	}
	if view != nil {
		ln, err := net.Listen("unix", f.socket)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET "+wire.PathCluster, func(w http.ResponseWriter, _ *http.Request) { wire.WriteJSON(w, 200, view) })
		srv := &http.Server{Handler: mux}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	return f
}

// scrape collects the collector's metrics, as /metrics would expose them.
func scrape(t *testing.T, f *fixture) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(f.c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// The fence's refusals and the shards held come from shared memory (the grants fenced summed
// over every worker); each shard's series are the node's own shards only, read from worker 0's
// cluster view at scrape time: shards 0 and 2, not b's shard 1 nor shard 3, whose lease expired.
func TestClusterMetrics(t *testing.T) {
	s := metricsFixture(t, config.StoreBackendPostgres, &clusterAt)
	w0, _ := s.seg.Worker(0)
	w1, _ := s.seg.Worker(1)
	w0.Add(shm.CounterGrantsFenced, 1)
	w1.Add(shm.CounterGrantsFenced, 2)
	w0.Add(shm.CounterAdvancesFenced, 4)
	w0.Add(shm.CounterResultsFenced, 5)
	w0.Set(shm.CounterShardsOwned, 2)
	w0.Add(shm.CounterShardsAcquired, 6)
	w0.Add(shm.CounterShardsLost, 4)
	want := []string{
		"# TYPE freshq_cluster_shard_moves_total counter",
		`freshq_cluster_shard_moves_total{direction="acquired"} 6`,
		`freshq_cluster_shard_moves_total{direction="lost"} 4`,
		"# TYPE freshq_cluster_shards_owned gauge",
		"freshq_cluster_shards_owned 2",
		"# TYPE freshq_floor_advances_fenced_total counter",
		"freshq_floor_advances_fenced_total 4",
		"# TYPE freshq_grants_fenced_total counter",
		"freshq_grants_fenced_total 3",
		"# TYPE freshq_results_fenced_total counter",
		"freshq_results_fenced_total 5",
		"# TYPE freshq_shard_epoch gauge",
		`freshq_shard_epoch{shard="0"} 4`,
		`freshq_shard_epoch{shard="2"} 7`,
		"# TYPE freshq_shard_floor_timestamp_seconds gauge",
		`freshq_shard_floor_timestamp_seconds{shard="0"} 500`,
		`freshq_shard_floor_timestamp_seconds{shard="2"} 700`,
		"# TYPE freshq_shard_rows_below_floor gauge",
		`freshq_shard_rows_below_floor{shard="0"} 0`,
		`freshq_shard_rows_below_floor{shard="2"} 3`,
	}
	if got := clusterLines(scrape(t, s)); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// clusterLines are the cluster's lines of a scrape but their HELP.
func clusterLines(out string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "# HELP") {
			continue
		}
		for _, name := range []string{"freshq_cluster_", "freshq_shard_", "_fenced_total"} {
			if strings.Contains(l, name) {
				got = append(got, l)
				break
			}
		}
	}
	return got
}

// On Badger the scrape has no cluster series at all; on PostgreSQL while worker 0 does not
// answer it has the counters of shared memory and no shard series (none is better than a stale
// or made-up one). Every other metric is there in both.
func TestClusterMetricsAbsent(t *testing.T) {
	out := scrape(t, metricsFixture(t, config.StoreBackendBadger, &clusterAt))
	if !strings.Contains(out, "freshq_claim_granted_total") {
		t.Fatalf("badger: the scrape lacks the other metrics:\n%s", out)
	}
	if got := clusterLines(out); len(got) > 0 {
		t.Errorf("badger: cluster series exposed:\n%s", strings.Join(got, "\n"))
	}
	out = scrape(t, metricsFixture(t, config.StoreBackendPostgres, nil))
	if !strings.Contains(out, "freshq_claim_granted_total") || !strings.Contains(out, "freshq_cluster_shards_owned 0") ||
		!strings.Contains(out, "freshq_grants_fenced_total 0") {
		t.Fatalf("worker 0 down: the scrape lacks the other metrics or the shared memory's cluster counters:\n%s", out)
	}
	for _, name := range []string{"freshq_shard_epoch{", "freshq_shard_floor_timestamp_seconds{", "freshq_shard_rows_below_floor{"} {
		if strings.Contains(out, name) {
			t.Errorf("worker 0 down: %s exposed", name)
		}
	}
}

// Every metric passes Prometheus' own lint, which `promtool check metrics` runs in
// scripts/check-deploy.sh: names with units spelled out, counters ending in _total. (This is why
// a shard's floor is freshq_shard_floor_timestamp_seconds, not freshq_shard_floor_ms.)
func TestMetricsPassPromlint(t *testing.T) {
	out := scrape(t, metricsFixture(t, config.StoreBackendPostgres, &clusterAt))
	problems, err := promlint.New(strings.NewReader(out)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
