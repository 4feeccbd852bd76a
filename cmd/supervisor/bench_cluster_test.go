package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freshq/freshq/wire"
)

// benchShift is how far in the future BenchmarkQueueCluster seeds its rows, so that none is due
// while the nodes start and divide the shards among them.
const benchShift = 30 * 24 * time.Hour

// BenchmarkQueueCluster measures the queue with 1, 2 and 3 nodes on one PostgreSQL database
// (testkit/pgtest's server, a fresh database per sub-benchmark), side by side in one run: the
// same pipeline as BenchmarkQueueOverhead (claim, lease, sim render at zero latency, result,
// batched reschedule), each node a real supervisor with two workers (worker 0 and one render
// worker), on this machine's cores together with the database's server.
//
// One op is one job. The b.N targets are seeded due a month ahead; the nodes start, and once the
// cluster has settled (every node live, every shard held, the holdings unchanged for two lease
// TTLs), one transaction makes them all due, the way a write from another node would: it locks
// every shard's floor row, moves the rows' due times back by the month and lowers each floor to
// its shard's first due row. The clock runs from its commit until the nodes together have
// acknowledged b.N results. Reported: jobs/s, CPU per job of every node's processes (cpu-us/job)
// and of the database's server (pg-cpu-us/job), the share of each node's acknowledged results
// (min-node-%: the smallest; an even split of k nodes is 100/k), and grants served from the
// ready set.
func BenchmarkQueueCluster(b *testing.B) {
	if binDir == "" {
		b.Skip("binaries not built (-short)")
	}
	for _, k := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("nodes=%d", k), func(b *testing.B) { benchCluster(b, k) })
	}
}

func benchCluster(b *testing.B, k int) {
	be := postgresFor(b)
	serverCPU := pgServerCPU(b, be.dsn)
	seedDue(b, be, b.N, benchShift)
	nodes := make([]*node, k)
	for i := range nodes {
		yaml := benchConfig + be.yaml + fmt.Sprintf("node: {id: bench-%d}\ncluster: {lease_ttl: 2s}\n", i)
		nodes[i] = startNode(b, b.TempDir(), 2, yaml, "")
	}
	for _, n := range nodes {
		waitFor(b, "readiness", 120*time.Second, n.ready)
	}
	waitSettled(b, nodes, 2*time.Second)
	// Steady state: a node that joined others holds no share of a host's limit for a grace
	// (render.timeout + a tick + 1 s, docs/CLUSTER.md); the run starts once every node holds its
	// share, as the shards' division is waited for above.
	waitFor(b, "every node's share of the hosts' limits", 5*time.Minute, func() bool {
		for _, n := range nodes {
			f, ok := n.farm()
			if !ok || f.Nodes != k || time.Now().UnixMilli() < f.SinceMs+f.GraceMs {
				return false
			}
		}
		return true
	})
	var pids []int
	for _, n := range nodes {
		seg := n.segment()
		for i := range 2 {
			w, _ := seg.Worker(i)
			pids = append(pids, w.Status().PID)
		}
		pids = append(pids, n.cmd.Process.Pid)
	}
	acked := func() []float64 {
		out := make([]float64, k)
		for i, n := range nodes {
			out[i] = n.metrics()["freshq_claim_to_result_seconds_count"]
		}
		return out
	}
	before := acked()
	cpu0, pg0 := sum(cpuTimes(pids)), serverCPU()
	b.ResetTimer()
	makeDue(b, be.dsn, benchShift)
	start := time.Now()
	var done []float64
	waitFor(b, "every result acknowledged", 20*time.Minute, func() bool {
		done = acked()
		return sum(done)-sum(before) >= float64(b.N)
	})
	elapsed := time.Since(start)
	b.StopTimer()
	cpu1, pg1 := sum(cpuTimes(pids)), serverCPU()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(1e6*(cpu1-cpu0)/float64(b.N), "cpu-us/job")
	b.ReportMetric(1e6*(pg1-pg0)/float64(b.N), "pg-cpu-us/job")
	share := 100.0
	for i := range done {
		share = min(share, 100*(done[i]-before[i])/(sum(done)-sum(before)))
	}
	b.ReportMetric(share, "min-node-%")
	ready, index := 0.0, 0.0
	for _, n := range nodes {
		m := n.metrics()
		ready += m[`freshq_claim_granted_total{source="ready"}`]
		index += m[`freshq_claim_granted_total{source="index"}`]
	}
	if ready+index > 0 {
		b.ReportMetric(100*ready/(ready+index), "ready-%")
	}
	for _, n := range nodes {
		n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range nodes {
		<-n.exited
	}
}

// seedDue files n targets as seedStore does, due shift later than it would.
func seedDue(b *testing.B, be backend, n int, shift time.Duration) {
	seedStore(b, be, n)
	conn := pgConn(b, be.dsn)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE freshq_schedule SET due_at_ms = due_at_ms + $1`, shift.Milliseconds()); err != nil {
		b.Fatal(err)
	}
}

// makeDue moves every row back by shift in one transaction that keeps the floor protocol
// (docs/postgres.md): it locks every shard's floor row first, in shard order as the funnel and
// the advance do, then moves the rows and lowers each floor to its shard's first due row.
func makeDue(b *testing.B, dsn string, shift time.Duration) {
	ctx := context.Background()
	conn := pgConn(b, dsn)
	defer conn.Close(ctx)
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT shard FROM freshq_floor ORDER BY shard FOR UPDATE`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE freshq_schedule SET due_at_ms = due_at_ms - $1`, shift.Milliseconds()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE freshq_floor f SET floor_ms = least(f.floor_ms, m.first)
			FROM (SELECT shard, min(due_at_ms) AS first FROM freshq_schedule GROUP BY shard) m WHERE m.shard = f.shard`)
		return err
	})
	if err != nil {
		b.Fatalf("making the rows due: %v", err)
	}
}

func pgConn(b testing.TB, dsn string) *pgx.Conn {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	return conn
}

// waitSettled waits until the cluster has settled: every node live in the view, every shard
// held unexpired by one of them, and the number each holds unchanged for stable (the cluster
// moves shards on its renewals, every lease_ttl/4).
func waitSettled(b *testing.B, nodes []*node, stable time.Duration) {
	var last []int
	since := time.Now()
	waitFor(b, "the cluster to settle (every node live, every shard held, holdings stable)", 2*time.Minute, func() bool {
		v, ok := clusterOf(nodes[0])
		held := make([]int, len(nodes))
		if ok && len(v.Nodes) == len(nodes) {
			for _, s := range v.Shards {
				for i := range nodes {
					if s.Owner == fmt.Sprintf("bench-%d", i) && s.ExpiresAtMs > v.NowMs {
						held[i]++
					}
				}
			}
		}
		if !ok || sum64(held) != len(v.Shards) || slices.Contains(held, 0) || !slices.Equal(held, last) {
			last, since = held, time.Now()
			return false
		}
		return time.Since(since) >= stable
	})
}

func sum64(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}

// clusterOf is n's GET /v1/cluster.
func clusterOf(n *node) (wire.ClusterView, bool) {
	resp, err := http.Get("http://" + n.addr + wire.PathCluster)
	if err != nil {
		return wire.ClusterView{}, false
	}
	defer resp.Body.Close()
	var v wire.ClusterView
	return v, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&v) == nil
}
