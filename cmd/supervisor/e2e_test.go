package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/pgtest"
	"github.com/freshq/freshq/testkit/testbin"
)

// These tests run the real binaries: the supervisor forks real workers that share a real
// segment and a real Badger store. Time that must pass (lease expiry) is moved through the
// shared clock offset file (internal/clock), never slept away; the only waits are for
// conditions, each with a generous deadline that turns a hang into a failure.

var binDir string

func TestMain(m *testing.M) {
	code := testbin.Main(m, &binDir, "freshq-e2e-bin-", map[string]string{"freshq-supervisor": ".", "freshq-worker": "../worker"})
	pgtest.Stop() // a cluster this binary started for its PostgreSQL tests, if any
	os.Exit(code)
}

type node struct {
	t       testing.TB
	dir     string
	addr    string
	segPath string
	clockF  string
	cmd     *exec.Cmd
	log     *lockedBuffer // written by the process's output copier while a test reads it
	exited  chan error
}

func freePort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// seed files n targets, half from a sitemap, all due, into the Badger store of dataDir before
// the supervisor starts.
func seed(t testing.TB, dataDir string, n int) []string {
	return seedStore(t, badgerIn(dataDir), n)
}

// seedStore is seed on any backend.
func seedStore(t testing.TB, b backend, n int) []string {
	st := b.open(t)
	defer st.Close()
	now := clock.NowMs()
	keys := make([]string, n)
	ws := make([]store.Write, 0, n)
	for i := range n {
		url := fmt.Sprintf("https://shop.test/c/item-%05d", i)
		keys[i] = "desktop|" + url
		src := store.SourceDiscovered
		if i%2 == 0 {
			src = store.SourceSitemap
		}
		sch, err := store.NewSchedule([]byte(keys[i]), now-int64(i)*1000, src == store.SourceSitemap, 0, store.Lanes{NeverRendered: true})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, store.Write{Schedule: sch, Target: &store.Target{URL: url, Device: "desktop", Source: src}})
	}
	for len(ws) > 0 { // in chunks: one transaction each on PostgreSQL
		n := min(len(ws), 20_000)
		if err := st.WriteSchedules(ws[:n]); err != nil {
			t.Fatal(err)
		}
		ws = ws[n:]
	}
	return keys
}

func startNode(t testing.TB, dir string, workers int, extraYAML string, workerBin string) *node {
	t.Helper()
	return startNodeEvery(t, dir, workers, 24*time.Hour, extraYAML, workerBin)
}

// startNodeEvery is startNode with the catalog route's interval, the seeded rows' cadence,
// set to every.
func startNodeEvery(t testing.TB, dir string, workers int, every time.Duration, extraYAML string, workerBin string) *node {
	t.Helper()
	n := &node{t: t, dir: dir, addr: freePort(t), segPath: filepath.Join("/dev/shm", "freshq-e2e-"+strconv.Itoa(os.Getpid())+"-"+filepath.Base(dir)+".seg"),
		log: &lockedBuffer{}, exited: make(chan error, 1)}
	n.clockF = filepath.Join(dir, "clock")
	if _, err := os.Stat(n.clockF); err != nil {
		os.WriteFile(n.clockF, make([]byte, 8), 0o600)
	}
	cfg := fmt.Sprintf(`data_dir: %s
listen: %s
workers: %d
shm: {path: %s}
log: {level: info}
routes:
  - {name: catalog, match: prefix, path: /c/, interval: %s}
%s`, dir, n.addr, workers, n.segPath, every, extraYAML)
	cfgPath := filepath.Join(dir, "freshq.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if workerBin == "" {
		workerBin = filepath.Join(binDir, "freshq-worker")
	}
	n.cmd = exec.Command(filepath.Join(binDir, "freshq-supervisor"), "--config", cfgPath, "--worker-bin", workerBin)
	rt := runtimeDirFor(t)
	n.cmd.Env = append(os.Environ(), clock.EnvFile+"="+n.clockF, "RUNTIME_DIRECTORY="+rt)
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.exited <- n.cmd.Wait() }()
	t.Cleanup(func() {
		n.cmd.Process.Kill()
		os.Remove(n.segPath)
		os.Remove(n.segPath + ".lock")
		if t.Failed() {
			t.Logf("supervisor log:\n%s", lastLogLines(n.log.String(), 40))
		}
	})
	return n
}

// runtimeDirFor is a private runtime directory for one supervisor (RUNTIME_DIRECTORY), so that
// a node killed at the end of its test leaves its socket and configuration copy nowhere shared.
// It is short: the socket's path must fit a unix socket address.
func runtimeDirFor(t testing.TB) string {
	rt, err := os.MkdirTemp("", "fq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	return rt
}

func lastLogLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// advanceClock moves every process's clock forward.
func (n *node) advanceClock(d time.Duration) {
	b, err := os.ReadFile(n.clockF)
	if err != nil {
		n.t.Fatal(err)
	}
	off := int64(binary.LittleEndian.Uint64(b)) + d.Milliseconds()
	f, err := os.OpenFile(n.clockF, os.O_RDWR, 0)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	binary.LittleEndian.PutUint64(b, uint64(off))
	if _, err := f.WriteAt(b, 0); err != nil {
		n.t.Fatal(err)
	}
}

func waitFor(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metrics scrapes /metrics into name{labels} → value.
func (n *node) metrics() map[string]float64 {
	resp, err := http.Get("http://" + n.addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func (n *node) ready() bool {
	resp, err := http.Get("http://" + n.addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (n *node) segment() *shm.Segment {
	seg, err := shm.Attach(n.segPath)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { seg.Close() })
	return seg
}

func workerPID(seg *shm.Segment, i int) int {
	w, _ := seg.Worker(i)
	return w.Status().PID
}

func TestEndToEndRendersEverythingThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	rendersEverythingThroughKills(t, dir, badgerIn(dir))
}

// rendersEverythingThroughKills renders 10,000 seeded targets on backend b through a kill -9 of
// a render worker, a kill -9 of worker 0 during a write burst, and a SIGTERM: every
// acknowledged write is present afterwards, every target rendered, and no row below the floor.
func rendersEverythingThroughKills(t *testing.T, dir string, b backend) {
	const targets = 10_000
	keys := seedStore(t, b, targets)
	// Every render slot is free to the corpus's one host: this tests durability, not politeness.
	n := startNode(t, dir, 3, "queue: {ready: {sweep_interval: 1s}}\nrender: {renderer: sim, concurrency: 8, sim: {latency_median: 10ms}, hosts: {max_concurrency: 1024}}\n"+b.yaml, "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	seg := n.segment()

	// kill -9 a render worker mid-render: renders are in flight all the time at this load.
	waitFor(t, "the first renders", 30*time.Second, func() bool { return n.metrics()[`freshq_render_total{outcome="ok"}`] > 500 })
	victim := workerPID(seg, 1)
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "worker 1's restart", 30*time.Second, func() bool {
		p := workerPID(seg, 1)
		return p != 0 && p != victim
	})

	// kill -9 worker 0 during a write burst: a writer keeps posting new targets, and every
	// batch it got a 200 for (all 100 accepted) must be in the store afterwards.
	var (
		ackedMu sync.Mutex
		acked   []string
	)
	stopWriter := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for batch := 0; ; batch++ {
			select {
			case <-stopWriter:
				return
			default:
			}
			var body strings.Builder
			keys := make([]string, 100)
			for i := range keys {
				url := fmt.Sprintf("https://shop.test/c/burst-%04d-%03d", batch, i)
				keys[i] = "desktop|" + url
				fmt.Fprintf(&body, "{\"url\":%q,\"source\":\"sitemap\"}\n", url)
			}
			resp, err := http.Post("http://"+n.addr+"/v1/targets", "application/x-ndjson", strings.NewReader(body.String()))
			if err != nil {
				continue
			}
			var out struct{ Accepted int }
			json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && out.Accepted == 100 {
				ackedMu.Lock()
				acked = append(acked, keys...)
				ackedMu.Unlock()
			}
		}
	}()
	waitFor(t, "a few acknowledged batches", 30*time.Second, func() bool {
		ackedMu.Lock()
		defer ackedMu.Unlock()
		return len(acked) >= 500
	})
	w0 := workerPID(seg, 0)
	if err := syscall.Kill(w0, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "worker 0's restart", 30*time.Second, func() bool {
		p := workerPID(seg, 0)
		return p != 0 && p != w0 && n.ready()
	})
	ackedBefore := func() int { ackedMu.Lock(); defer ackedMu.Unlock(); return len(acked) }()
	waitFor(t, "acknowledged writes after the restart", 30*time.Second, func() bool {
		ackedMu.Lock()
		defer ackedMu.Unlock()
		return len(acked) > ackedBefore+300
	})
	close(stopWriter)
	<-writerDone
	keys = append(keys, acked...)
	t.Logf("%d targets acknowledged during the burst", len(acked))
	// The killed render worker's leases lapse at their TTL: move every process's clock past it.
	n.advanceClock(11 * time.Minute)

	waitFor(t, "every target rendered", 120*time.Second, func() bool {
		m := n.metrics()
		backlog := 0.0
		for _, lane := range []string{"urgent", "submitted", "discovered", "cold"} {
			backlog += m[`freshq_backlog{lane="`+lane+`"}`]
		}
		return m != nil && backlog == 0 && m[`freshq_ready_sweeps_total{outcome="ok"}`] > 0 && m["freshq_leases_live"] == 0
	})
	m := n.metrics()
	if m["freshq_below_floor"] != 0 {
		t.Fatalf("%v rows stranded below the floor", m["freshq_below_floor"])
	}
	if m[`freshq_worker_restarts_total{worker="1"}`] != 1 || m[`freshq_worker_restarts_total{worker="0"}`] != 1 {
		t.Fatalf("restart counters: worker 0 %v, worker 1 %v", m[`freshq_worker_restarts_total{worker="0"}`], m[`freshq_worker_restarts_total{worker="1"}`])
	}
	// The API and the metrics agree once the queue is quiet.
	resp, err := http.Get("http://" + n.addr + "/v1/queue")
	if err != nil {
		t.Fatal(err)
	}
	var q struct {
		Claims  map[string]float64 `json:"claims"`
		Backlog map[string]float64 `json:"backlog"`
	}
	json.NewDecoder(resp.Body).Decode(&q)
	resp.Body.Close()
	m = n.metrics()
	for _, src := range []string{"ready", "index"} {
		if got := m[`freshq_claim_granted_total{source="`+src+`"}`]; got != q.Claims[src] || got == 0 && src == "ready" {
			t.Fatalf("grants from %s: metrics %v, /v1/queue %v", src, got, q.Claims[src])
		}
	}
	for lane, v := range q.Backlog {
		if m[`freshq_backlog{lane="`+lane+`"}`] != v {
			t.Fatalf("backlog %s: metrics %v, /v1/queue %v", lane, m[`freshq_backlog{lane="`+lane+`"}`], v)
		}
	}
	granted := m[`freshq_claim_granted_total{source="ready"}`] + m[`freshq_claim_granted_total{source="index"}`]
	if granted < targets {
		t.Fatalf("%v grants for %d targets", granted, targets)
	}

	// SIGTERM drains and exits 0 within the drain bound.
	start := time.Now()
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-n.exited:
		if err != nil {
			t.Fatalf("supervisor exit after SIGTERM: %v", err)
		}
	case <-time.After(30*time.Second + 10*time.Second): // default shutdown_timeout 30s, plus margin
		t.Fatal("supervisor did not exit within shutdown_timeout plus its margin")
	}
	t.Logf("drained in %v", time.Since(start))

	// Every target has its page, and the store is consistent.
	st := b.open(t)
	defer st.Close()
	for _, k := range keys {
		if _, err := st.GetPage([]byte(k)); err != nil {
			t.Fatalf("%s: no page: %v", k, err)
		}
		tgt, err := st.GetTarget([]byte(k))
		if err != nil || tgt.LastRender.AtMs == 0 {
			t.Fatalf("%s: target %+v %v", k, tgt, err)
		}
	}
	rep, err := st.VerifyIndex()
	if err != nil {
		t.Fatalf("index check: %v (%+v)", err, rep)
	}
}

// A worker that keeps dying trips the restart intensity, and the supervisor exits non-zero so
// that systemd's own policy takes over.
func TestRestartStormExitsNonZero(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	n := startNode(t, dir, 3, "supervisor: {restart_intensity: 3, restart_period: 60s, backoff_min: 10ms, backoff_max: 20ms}\n", "/bin/false")
	select {
	case err := <-n.exited:
		var ee *exec.ExitError
		if err == nil || !errors.As(err, &ee) || ee.ExitCode() != ExitIntensity {
			t.Fatalf("supervisor exit %v, want exit code %d", err, ExitIntensity)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the restart storm did not stop the supervisor")
	}
	if !strings.Contains(n.log.String(), "restart intensity exceeded") {
		t.Fatalf("no intensity log line:\n%s", lastLogLines(n.log.String(), 20))
	}
}
