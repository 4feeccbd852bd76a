package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
)

// resultsCommitted is how many results worker 0 has committed: the count of the claim-to-result
// histogram, summed over the workers' counters in shared memory as /metrics sums them. The
// benchmark polls it every 50 ms, and a scrape of /metrics that often would cost the node more
// than reading a few counters: on PostgreSQL each scrape reads the cluster view from the
// database: over a quarter of the server's CPU per job at a million rows.
func resultsCommitted(seg *shm.Segment, workers int) uint64 {
	var n uint64
	for i := range workers {
		w, err := seg.Worker(i)
		if err != nil {
			return 0
		}
		for b := range len(shm.ResultLatencyBuckets) + 1 { // the buckets and +Inf
			n += w.Load(shm.CounterResultLatency + shm.Counter(b))
		}
	}
	return n
}

// BenchmarkQueueOverhead measures the queue itself, on Badger or, with FRESHQ_BENCH_STORE=postgres,
// on a fresh PostgreSQL database of testkit/pgtest's server (then also the server's CPU per job): claim → lease → render (the sim renderer at
// zero latency) → result → batched reschedule, across real processes. One op is one job: the
// benchmark seeds b.N targets, starts the supervisor, and times from readiness until worker 0
// has acknowledged every result. It reports jobs/s, the CPU per job of all its processes
// (supervisor and workers), worker 0's share of the workers' CPU, and the p50/p99
// claim-to-result latency from the shm histogram. The size of the store is the -benchtime
// (200000x, 1000000x: scripts/bench-queue.sh runs both), unless FRESHQ_BENCH_ROWS sets it
// apart from the number of jobs. FRESHQ_BENCH_YAML is appended to the configuration, to compare
// settings side by side (on Badger, `store: {read_cache: 0}`). FRESHQ_BENCH_CONSOLE_POLL=1 keeps a
// headless Chromium loading the console's overview once a second throughout (consolePoller).
//
// With more jobs than rows the store is rendered again and again, as a node renders its
// pages all day: the rows' route has a cadence of a minute, and the benchmark moves every
// process's clock on by a minute each time another half of the store has been rendered, so
// the rows rendered before that move are due again while the rest are still being rendered.
// That is the steady state of a small store: a run of 50,000 jobs over 50,000 rows lasts
// about a second and its rewrites barely leave Badger's memtables and level 0, where a million
// jobs over the same rows pay for the flushes and compactions that every later hour of such a
// node pays for (docs/store.md).
func BenchmarkQueueOverhead(b *testing.B) {
	if binDir == "" {
		b.Skip("binaries not built (-short)")
	}
	for _, workers := range []int{2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			dir := b.TempDir()
			be, serverCPU := benchBackend(b, dir)
			rows := envInt("FRESHQ_BENCH_ROWS", b.N)
			seedStore(b, be, rows)
			again, every := rows < b.N, 24*time.Hour // again: the store is rendered more than once
			if again {
				every = againCadence
			}
			n := startNodeEvery(b, dir, workers, every, benchConfig+be.yaml+os.Getenv("FRESHQ_BENCH_YAML")+"\n", "")
			waitFor(b, "readiness", 120*time.Second, n.ready)
			if be.dsn != "" {
				// As Badger rebuilds its class index before the node is ready, so the
				// measurement starts once worker 0 has classed the seeded rows (and
				// vacuumed the table after moving them).
				waitFor(b, "the seeded rows classed", 10*time.Minute, func() bool {
					return strings.Contains(n.log.String(), `"message":"rows reclassified"`)
				})
			}
			seg := n.segment()
			pids := make([]int, workers)
			for i := range pids {
				w, _ := seg.Worker(i)
				pids[i] = w.Status().PID
			}
			all := append(slices.Clone(pids), n.cmd.Process.Pid)
			poll := startConsolePoll(b, n) // FRESHQ_BENCH_CONSOLE_POLL=1: a browser on the overview
			cpu0, all0, pg0 := cpuTimes(pids), sum(cpuTimes(all)), serverCPU()
			b.ResetTimer()
			start := time.Now()
			// 10 minutes, or 2 ms a job for a large store on a loaded machine.
			nextMove := uint64(rows / 2)
			waitFor(b, "every result acknowledged", max(10*time.Minute, time.Duration(b.N)*2*time.Millisecond), func() bool {
				done := resultsCommitted(seg, workers)
				if again && done >= nextMove {
					n.advanceClock(againCadence + time.Second)
					nextMove = done + uint64(max(rows/2, 1))
				}
				return done >= uint64(b.N)
			})
			elapsed := time.Since(start)
			b.StopTimer()
			cpu1, all1, pg1 := cpuTimes(pids), sum(cpuTimes(all)), serverCPU()
			poll.stop(b)
			m := n.metrics()
			total := 0.0
			for i := range pids {
				total += cpu1[i] - cpu0[i]
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
			b.ReportMetric(1e6*(all1-all0)/float64(b.N), "cpu-us/job")
			if pg1 > 0 {
				b.ReportMetric(1e6*(pg1-pg0)/float64(b.N), "pg-cpu-us/job")
			}
			if total > 0 {
				b.ReportMetric(100*(cpu1[0]-cpu0[0])/total, "w0-cpu-%")
				b.ReportMetric(total/elapsed.Seconds(), "cores-used")
			}
			ready, index := m[`freshq_claim_granted_total{source="ready"}`], m[`freshq_claim_granted_total{source="index"}`]
			if ready+index > 0 {
				b.ReportMetric(100*ready/(ready+index), "ready-%")
			}
			if rss := residentBytes(pids[0]); rss > 0 { // worker 0's RSS, Badger's memory included
				b.ReportMetric(float64(rss)/(1<<20), "w0-rss-MiB")
				b.ReportMetric(float64(rss)/float64(rows), "w0-rss-B/row")
			}
			b.ReportMetric(1000*quantile(m, "freshq_claim_to_result_seconds", 0.50), "p50-ms")
			b.ReportMetric(1000*quantile(m, "freshq_claim_to_result_seconds", 0.99), "p99-ms")
			n.cmd.Process.Signal(syscall.SIGTERM)
			<-n.exited
		})
	}
}

// BenchmarkWorker0Memory measures worker 0's memory per stored row on Badger: for each size in
// FRESHQ_BENCH_MEM_ROWS (default "1000000"; run with -benchtime 1x), it seeds that many due,
// never-rendered rows, starts the supervisor with benchConfig, and once the first capacity
// recount has read every row and 50,000 results (or all of them) are acknowledged, reads worker 0's
// /proc status. rss-anon-MiB is its anonymous memory: the Go heap, Badger's memtables, caches
// and table indexes, and every per-row structure worker 0 keeps (the capacity ledger above
// all); the store's tables, mapped from files, count in rss-file-MiB, pages the kernel
// reclaims under pressure. The size of a row's own cost is the slope between two sizes run
// together: (anon at N₂ − anon at N₁) ÷ (N₂ − N₁), fixed costs (caches of a set size, the read
// cache, the ready set) cancelling out.
func BenchmarkWorker0Memory(b *testing.B) {
	if binDir == "" {
		b.Skip("binaries not built (-short)")
	}
	sizes := strings.Fields(os.Getenv("FRESHQ_BENCH_MEM_ROWS"))
	if len(sizes) == 0 {
		sizes = []string{"1000000"}
	}
	for _, sz := range sizes {
		rows, err := strconv.Atoi(sz)
		if err != nil || rows <= 0 {
			b.Fatalf("FRESHQ_BENCH_MEM_ROWS: %q is not a row count", sz)
		}
		b.Run("rows="+sz, func(b *testing.B) {
			dir := b.TempDir()
			be := badgerIn(dir)
			seedStore(b, be, rows)
			n := startNode(b, dir, 2, benchConfig+be.yaml, "")
			waitFor(b, "readiness", 10*time.Minute, n.ready)
			seg := n.segment()
			w0, _ := seg.Worker(0)
			pid := w0.Status().PID
			done := float64(min(rows, 50_000))
			// The first recount has read every row into the ledger when it logs (results feed
			// the ledger's demand before that, so the demand's figure says nothing of it).
			recounted := fmt.Sprintf(`"first":true,"rows":%d,`, rows)
			waitFor(b, "the first recount of every row and the first results", 20*time.Minute, func() bool {
				return strings.Contains(n.log.String(), recounted) &&
					n.metrics()["freshq_claim_to_result_seconds_count"] >= done
			})
			st := procStatus(pid)
			if dir := os.Getenv("FRESHQ_BENCH_MEM_HEAP"); dir != "" {
				saveHeapProfile(b, pid, filepath.Join(dir, "heap-rows="+sz+".pb.gz"))
			}
			b.ReportMetric(float64(st["RssAnon"])/(1<<20), "rss-anon-MiB")
			b.ReportMetric(float64(st["RssFile"])/(1<<20), "rss-file-MiB")
			b.ReportMetric(float64(st["RssAnon"])/float64(rows), "anon-B/row")
			n.cmd.Process.Signal(syscall.SIGTERM)
			<-n.exited
		})
	}
}

// saveHeapProfile writes worker 0's heap profile (pid's, asked over the socket its command
// line names) to path, for `go tool pprof -sample_index=inuse_space`.
func saveHeapProfile(b *testing.B, pid int, path string) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		b.Fatal(err)
	}
	args := strings.Split(string(raw), "\x00")
	i := slices.Index(args, "-socket")
	if i < 0 || i+1 >= len(args) {
		b.Fatalf("worker 0's command line names no socket: %q", args)
	}
	sock := args[i+1]
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Get("http://w0/internal/debug/pprof/heap")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("worker 0's heap profile: %d, %v", resp.StatusCode, err)
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		b.Fatal(err)
	}
}

// procStatus reads the kB fields of /proc/pid/status, in bytes.
func procStatus(pid int) map[string]int64 {
	out := map[string]int64{}
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			out[strings.TrimSuffix(f[0], ":")] = kb << 10
		}
	}
	return out
}

// againCadence is the cadence of the rows of a BenchmarkQueueOverhead run that renders its
// store more than once: the shortest a row can have.
const againCadence = policy.MinCadence

// benchConfig: zero-latency renders, a ready set large enough to hold a second of work at the
// target rate (30,000 jobs/s), refreshed twice a second. The corpus is one host's, and the sim
// renderer loads no host: politeness allows that host every render slot there is, so that the
// benchmark measures the queue (each grant still takes its host slot).
const benchConfig = `queue:
  ready: {capacity: 50000, sweep_interval: 500ms}
render:
  renderer: sim
  concurrency: 16
  hosts: {max_concurrency: 1024}
`

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

// residentBytes reads VmRSS of pid, in bytes (0 if it cannot).
func residentBytes(pid int) int64 { return procStatus(pid)["VmRSS"] }

// cpuTimes reads utime+stime, in seconds, of each pid.
func cpuTimes(pids []int) []float64 {
	out := make([]float64, len(pids))
	for i, p := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ut, _ := strconv.ParseFloat(fields[11], 64)
		st, _ := strconv.ParseFloat(fields[12], 64)
		out[i] = (ut + st) / 100 // USER_HZ
	}
	return out
}

// quantile estimates the q-quantile of a scraped histogram by linear interpolation in its buckets.
func quantile(m map[string]float64, name string, q float64) float64 {
	type bucket struct{ le, count float64 }
	var bs []bucket
	prefix := name + `_bucket{le="`
	for k, v := range m {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		le := strings.TrimSuffix(strings.TrimPrefix(k, prefix), `"}`)
		f, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue // +Inf
		}
		bs = append(bs, bucket{f, v})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	total := m[name+"_count"]
	if total == 0 || len(bs) == 0 {
		return 0
	}
	rank := q * total
	prevLe, prevCount := 0.0, 0.0
	for _, bk := range bs {
		if bk.count >= rank {
			if bk.count == prevCount {
				return bk.le
			}
			return prevLe + (bk.le-prevLe)*(rank-prevCount)/(bk.count-prevCount)
		}
		prevLe, prevCount = bk.le, bk.count
	}
	return bs[len(bs)-1].le
}

// benchBackend is the store BenchmarkQueueOverhead runs on (FRESHQ_BENCH_STORE), and a reading of
// the CPU seconds its server has used so far (0 for the embedded store).
func benchBackend(b *testing.B, dir string) (backend, func() float64) {
	if os.Getenv("FRESHQ_BENCH_STORE") != "postgres" {
		return badgerIn(dir), func() float64 { return 0 }
	}
	be := postgresFor(b)
	return be, pgServerCPU(b, be.dsn)
}

// pgServerCPU reads the CPU seconds the server of dsn has used so far (treeCPU).
func pgServerCPU(b testing.TB, dsn string) func() float64 {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	var backendPID int
	err = conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backendPID)
	conn.Close(ctx)
	if err != nil {
		b.Fatal(err)
	}
	postmaster := parentPID(backendPID)
	return func() float64 { return treeCPU(postmaster) }
}

// parentPID is the parent of pid, from /proc.
func parentPID(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// statFields are the fields of /proc/pid/stat after the command name: state is [0], ppid [1],
// utime [11], stime [12], cutime [13], cstime [14].
func statFields(pid int) []string {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	s := string(raw)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
}

// treeCPU is the CPU seconds of a PostgreSQL server: the postmaster's own, what it reaped from
// backends that exited, and its live backends'.
func treeCPU(postmaster int) float64 {
	ticks := func(f []string, from, to int) float64 {
		t := 0.0
		for i := from; i <= to && i < len(f); i++ {
			v, _ := strconv.ParseFloat(f[i], 64)
			t += v
		}
		return t
	}
	total := ticks(statFields(postmaster), 11, 14)
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if f := statFields(pid); len(f) > 14 && f[1] == strconv.Itoa(postmaster) {
			total += ticks(f, 11, 12)
		}
	}
	return total / 100 // USER_HZ
}
