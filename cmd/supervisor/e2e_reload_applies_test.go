package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

// What an owner changes by a reload (or by a restart with the changed file) reaches every page
// it governs: the rows already rendered, not only the ones rendered next.

const reloadRows = 12

// reloadYAML renders with the sim renderer, sweeping every second, so that a row due is
// rendered within a few seconds of the processes' clock.
const reloadYAML = "queue: {ready: {sweep_interval: 1s}}\nrender: {renderer: sim, concurrency: 8, sim: {latency_median: 10ms}, hosts: {max_concurrency: 1024}}\n"

func reloadURL(i int) string { return fmt.Sprintf("https://shop.test/c/item-%05d", i) }

// renderedAt reads every seeded row's last render and due time; ok is false while one is not
// rendered yet.
func (n *node) renderedRows(t *testing.T) (last, due []time.Time, ok bool) {
	for i := range reloadRows {
		e, code := n.explain(reloadURL(i))
		if code != 200 || e.LastRender == nil {
			return nil, nil, false
		}
		last, due = append(last, e.LastRender.At), append(due, e.DueAt)
	}
	return last, due, true
}

// clockNow is the processes' clock: the wall clock plus the offset the test moved it by.
func (n *node) clockNow(t *testing.T) time.Time {
	b, err := os.ReadFile(n.clockF)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(binary.LittleEndian.Uint64(b))
	return time.Now().Add(time.Duration(off) * time.Millisecond)
}

// setRouteInterval rewrites the catalog route's interval in the node's configuration file.
func (n *node) setRouteInterval(t *testing.T, from, to time.Duration) {
	t.Helper()
	path := filepath.Join(n.dir, "freshq.yaml")
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old, new := []byte("interval: "+from.String()+"}"), []byte("interval: "+to.String()+"}")
	if !bytes.Contains(cfg, old) {
		t.Fatalf("the configuration has no %s", old)
	}
	if err := os.WriteFile(path, bytes.Replace(cfg, old, new, 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (n *node) logLines(parts ...string) int {
	c := 0
	for _, line := range strings.Split(n.log.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			c++
		}
	}
	return c
}

// renderedAtSixHours starts a node whose catalog route renders every 6 h, lets it render the
// seeded rows, and moves the clock 10 minutes on: every row is then due in about 5 h 50 m.
func renderedAtSixHours(t *testing.T, dir string) *node {
	return renderedAtSixHoursOn(t, dir, badgerIn(dir))
}

// renderedAtSixHoursOn is renderedAtSixHours on backend b.
func renderedAtSixHoursOn(t *testing.T, dir string, b backend) *node {
	seedStore(t, b, reloadRows)
	n := startNodeEvery(t, dir, 2, 6*time.Hour, reloadYAML+b.yaml, "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	waitFor(t, "every seeded row rendered", 60*time.Second, func() bool { _, _, ok := n.renderedRows(t); return ok })
	n.advanceClock(10 * time.Minute)
	last, due, _ := n.renderedRows(t)
	for i := range last {
		if d := due[i].Sub(last[i]); d < 6*time.Hour-time.Minute || d > 6*time.Hour+time.Minute {
			t.Fatalf("row %d: due %s after its render, want 6h", i, d)
		}
	}
	return n
}

// shortenedAndRendered checks that after the interval was cut to 3 m, every row is rendered
// again (its due time moved to within 3 m of its last render, which the clock has passed) and
// filed 3 m after that render; then that the clock passing 3 m more renders them all again.
func shortenedAndRendered(t *testing.T, n *node, since time.Time) {
	t.Helper()
	waitFor(t, "every row rendered again at the new interval", 60*time.Second, func() bool {
		last, _, ok := n.renderedRows(t)
		if !ok {
			return false
		}
		for _, l := range last {
			if l.Before(since) {
				return false
			}
		}
		return true
	})
	last, due, _ := n.renderedRows(t)
	for i := range last {
		if d := due[i].Sub(last[i]); d > 3*time.Minute+time.Second {
			t.Fatalf("row %d: due %s after its render, want at most 3m", i, d)
		}
	}
	before := n.clockNow(t)
	n.advanceClock(3*time.Minute + 5*time.Second)
	waitFor(t, "every row rendered once the clock passed 3m", 60*time.Second, func() bool {
		last, _, ok := n.renderedRows(t)
		if !ok {
			return false
		}
		for _, l := range last {
			if l.Before(before) {
				return false
			}
		}
		return true
	})
}

// A route's interval cut from 6 h to 3 m by a reload moves the rows rendered at 6 h: they are
// rendered within 3 m of their last render, not 5 h 50 m later, and worker 0 logs the run.
func TestReloadShortenedIntervalMovesExistingRows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	shortenedByReload(t, dir, badgerIn(dir))
}

// The same on PostgreSQL: the reschedule's writes go through its funnel and its fencing.
func TestReloadShortenedIntervalMovesExistingRowsOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	shortenedByReload(t, t.TempDir(), postgresFor(t))
}

func shortenedByReload(t *testing.T, dir string, b backend) {
	n := renderedAtSixHoursOn(t, dir, b)
	reloaded := n.logLines(`"worker":0`, "configuration reloaded")
	n.setRouteInterval(t, 6*time.Hour, 3*time.Minute)
	since := n.clockNow(t)
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "worker 0's reload", 30*time.Second, func() bool {
		return n.logLines(`"worker":0`, "configuration reloaded") > reloaded
	})
	shortenedAndRendered(t, n, since)
	waitFor(t, "the reschedule's log line", 30*time.Second, func() bool {
		return n.logLines(`"worker":0`, "reschedule done", fmt.Sprintf(`"moved":%d`, reloadRows), fmt.Sprintf(`"total":%d`, reloadRows)) > 0
	})
	// And in /metrics: the last run's rows, not running, two runs (the start's and the reload's).
	m := n.metrics()
	if m["freshq_reschedule_rows_moved"] != reloadRows || m["freshq_reschedule_rows_scanned"] != reloadRows ||
		m["freshq_reschedule_running"] != 0 || m["freshq_reschedule_runs_total"] != 2 {
		t.Fatalf("reschedule metrics: moved %v scanned %v running %v runs %v", m["freshq_reschedule_rows_moved"],
			m["freshq_reschedule_rows_scanned"], m["freshq_reschedule_running"], m["freshq_reschedule_runs_total"])
	}
}

// The same cut by a restart with the changed file: the rows filed before it move too.
func TestRestartWithShortenedIntervalMovesExistingRows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	n := renderedAtSixHours(t, dir)
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the supervisor did not stop")
	}
	since := n.clockNow(t)
	m := startNodeEvery(t, dir, 2, 3*time.Minute, reloadYAML, "")
	waitFor(t, "readiness after the restart", 60*time.Second, m.ready)
	shortenedAndRendered(t, m, since)
}

// A lengthened interval moves no row later and never earlier: each keeps the due time its last
// render filed, and the render at that time files the new cadence.
func TestReloadLengthenedIntervalKeepsDueTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	seed(t, dir, reloadRows)
	n := startNodeEvery(t, dir, 2, 3*time.Minute, reloadYAML, "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	waitFor(t, "every seeded row rendered", 60*time.Second, func() bool { _, _, ok := n.renderedRows(t); return ok })
	_, dueBefore, _ := n.renderedRows(t)
	n.setRouteInterval(t, 3*time.Minute, 6*time.Hour)
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the reschedule after the reload", 30*time.Second, func() bool {
		return n.logLines(`"worker":0`, "reschedule done") >= 2 // at start, and after the reload
	})
	_, due, _ := n.renderedRows(t)
	for i := range due {
		if !due[i].Equal(dueBefore[i]) {
			t.Fatalf("row %d: due %s, was %s", i, due[i], dueBefore[i])
		}
	}
	// Rendered at the due time filed, then filed 6 h on.
	since := n.clockNow(t)
	n.advanceClock(3*time.Minute + 5*time.Second)
	waitFor(t, "every row rendered at its old due time and filed at the new cadence", 60*time.Second, func() bool {
		last, due, ok := n.renderedRows(t)
		if !ok {
			return false
		}
		for i := range last {
			if last[i].Before(since) || due[i].Sub(last[i]) < 6*time.Hour-time.Minute {
				return false
			}
		}
		return true
	})
}

// rewriteConfig replaces from with to in the node's configuration file.
func (n *node) rewriteConfig(t *testing.T, from, to string) {
	t.Helper()
	path := filepath.Join(n.dir, "freshq.yaml")
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cfg, []byte(from)) {
		t.Fatalf("the configuration has no %q", from)
	}
	if err := os.WriteFile(path, bytes.Replace(cfg, []byte(from), []byte(to), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reloadAll sends SIGHUP and waits until the supervisor and both workers logged the reload
// with level in force.
func (n *node) reloadAll(t *testing.T, level string) {
	t.Helper()
	who := []string{`"role":"supervisor"`, `"worker":0`, `"worker":1`}
	before := make([]int, len(who))
	for i, w := range who {
		before[i] = n.logLines(w, "configuration reloaded", `"log_level":"`+level+`"`)
	}
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "every process's reload at "+level, 30*time.Second, func() bool {
		for i, w := range who {
			if n.logLines(w, "configuration reloaded", `"log_level":"`+level+`"`) <= before[i] {
				return false
			}
		}
		return true
	})
}

// log.level applies on reload in every process, in both directions: info → debug shows the
// supervisor's and both workers' debug lines, debug → info stops them.
func TestReloadAppliesLogLevelInEveryProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n := startNode(t, t.TempDir(), 2, "render: {renderer: sim}\n", "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	who := []string{`"role":"supervisor"`, `"worker":0`, `"worker":1`}

	n.rewriteConfig(t, "log: {level: info}", "log: {level: debug}")
	n.reloadAll(t, "debug")
	waitFor(t, "every process's debug line", 30*time.Second, func() bool {
		for _, w := range who {
			if n.logLines(w, `"level":"debug"`, "debug lines logged") == 0 {
				return false
			}
		}
		return true
	})

	n.rewriteConfig(t, "log: {level: debug}", "log: {level: info}")
	n.reloadAll(t, "info")
	// Once more at info: each process logs its debug line right after its reload line, so by
	// this reload's lines the previous one's would be there.
	n.reloadAll(t, "info")
	if c := n.logLines(`"level":"debug"`, `"log_level":"info"`); c > 0 {
		t.Fatalf("%d debug lines logged after log.level went back to info", c)
	}
}

// A restart-only key changed by SIGHUP is refused whole, naming the key: the running
// configuration stays, and a key reloaded alongside it is not applied either.
func TestReloadRefusesARestartOnlyKeyWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n := startNode(t, t.TempDir(), 2, "render: {renderer: sim}\nsupervisor: {restart_intensity: 5}\n", "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	n.rewriteConfig(t, "supervisor: {restart_intensity: 5}", "supervisor: {restart_intensity: 9}")
	n.rewriteConfig(t, "log: {level: info}", "log: {level: debug}")
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the reload's refusal", 30*time.Second, func() bool {
		return n.logLines("reload refused", "supervisor.restart_intensity", "restart") > 0
	})
	// The level in force is still info: a good reload (the key back as it runs) says so, and
	// only then is debug applied.
	n.rewriteConfig(t, "supervisor: {restart_intensity: 9}", "supervisor: {restart_intensity: 5}")
	n.reloadAll(t, "debug")
	if c := n.logLines("configuration reloaded"); c != 3 {
		t.Fatalf("%d reloads logged, want the good one's 3 (supervisor, two workers)", c)
	}
}

// topAndPlan reads the demand `freshqctl top` prints (/v1/queue's capacity) and the current
// demand `freshqctl plan` prints for the node's own file (POST /v1/plan): the same store
// under the same configuration.
func (n *node) topAndPlan(t *testing.T) (top, plan float64) {
	t.Helper()
	q := n.queueView()
	if q.Capacity == nil {
		t.Fatal("/v1/queue has no capacity section")
	}
	file, err := os.ReadFile(filepath.Join(n.dir, "freshq.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a := n.postRaw(wire.PathPlan, file)
	var p wire.Plan
	if a.code != 200 || json.Unmarshal(a.body, &p) != nil {
		t.Fatalf("POST %s: %d %s", wire.PathPlan, a.code, a.body)
	}
	return q.Capacity.Demand.Total, p.Current.Demand
}

// `freshqctl top` and `freshqctl plan` give one demand for one store and one configuration,
// after a reload too: 12 rows never rendered (nothing renders here: worker 0 alone, so the
// reschedule leaves them as they are) on a route cut from 6 h to 3 m are 12/180 s, not 12/6 h.
func TestTopAndPlanAgreeAfterReload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	seed(t, dir, reloadRows)
	n := startNodeEvery(t, dir, 1, 6*time.Hour, "", "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	const before, after = float64(reloadRows) / (6 * 3600), float64(reloadRows) / 180
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	waitFor(t, "top and plan at 6h", 30*time.Second, func() bool {
		top, plan := n.topAndPlan(t)
		return near(top, before) && near(plan, before)
	})
	reloaded := n.logLines(`"worker":0`, "configuration reloaded")
	n.setRouteInterval(t, 6*time.Hour, 3*time.Minute)
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "worker 0's reload", 30*time.Second, func() bool {
		return n.logLines(`"worker":0`, "configuration reloaded") > reloaded
	})
	var top, plan float64
	deadline := time.Now().Add(30 * time.Second)
	for {
		top, plan = n.topAndPlan(t)
		if near(top, after) && near(plan, after) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the reload to 3m: top says demand %.6f/s, plan %.6f/s; want both %.6f/s", top, plan, after)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
