package main

import (
	"fmt"
	"math"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkConditional measures what conditional GETs and change detection save: the renders
// avoided, the CPU they cost and the share of crawler requests served stale, on the
// change-schedule corpus of BenchmarkFreshness (freshSchedule and freshOrigin: 30 % of the pages
// never change, the others change as a Poisson process, half of the pages send an ETag and
// answer If-None-Match with 304, every answer costs the page's origin time), with the same
// crawler (crawlOne judges every answer against the origin's version at the time), on the real
// processes in real time. Three nodes run side by side, each with its own origin on the same
// hidden schedule, and the same crawler requests:
//
//   - defaults: queue.policy freshness (the change estimate) and freshness.conditional_every 10
//     (a page whose origin sent a validator is checked with a conditional GET, rendered in full
//     at least every tenth time);
//   - conditional_every 1: the same with no conditional GET, every due page rendered in full
//     (what the saving is measured against);
//   - ready, conditional_every 1: neither, every page rendered one interval after its last.
//
// A render avoided is a check the origin answered 304 (freshq_render_conditional_total: with
// the http renderer the conditional GET is the render's own request; with chrome it is the one
// request made instead of a browser render). Renders performed are freshq's render attempts
// (every result committed) less those 304s. With chrome a check the origin answered 200 is
// followed by the browser's own fetch: the origin's 200s are then the renders performed plus
// those checks. The figures are read over the window (from FRESHQ_BENCH_FROM to the end):
// freshq's counters and each node's process tree's CPU (the supervisor, its workers and their
// browsers, from /proc), and the origins' own counts of 200s and 304s.
//
// FRESHQ_BENCH_RENDERER (http, the default, or chrome) is the nodes' renderer; the corpus is one
// site (127.0.0.1). Sized as BenchmarkFreshness: FRESHQ_BENCH_MINUTES (6), FRESHQ_BENCH_FROM
// (2), FRESHQ_BENCH_PAGES (2.6 × the capacity's renders a minute), FRESHQ_BENCH_RATE (30),
// FRESHQ_BENCH_SEED (1).
func BenchmarkConditional(b *testing.B) {
	if binDir == "" {
		b.Skip("binaries not built (-short)")
	}
	minutes := benchEnvInt(b, "FRESHQ_BENCH_MINUTES", 6)
	from := benchEnvInt(b, "FRESHQ_BENCH_FROM", 2)
	if from >= minutes {
		b.Fatalf("FRESHQ_BENCH_FROM=%d must be below FRESHQ_BENCH_MINUTES=%d", from, minutes)
	}
	renderer := cmpEnv("FRESHQ_BENCH_RENDERER", "http")
	if renderer != "http" && renderer != "chrome" {
		b.Fatalf("FRESHQ_BENCH_RENDERER=%q: http or chrome", renderer)
	}
	if renderer == "chrome" {
		needChromiumBench(b)
	}
	const concurrency, meanCost = 4, 0.65
	expected := concurrency / meanCost
	run := &freshBenchRun{
		corpus: "one site", hosts: 1, concurrency: concurrency, interval: time.Minute,
		pages: benchEnvInt(b, "FRESHQ_BENCH_PAGES", int(math.Round(2.6*expected*60))),
		rate:  float64(benchEnvInt(b, "FRESHQ_BENCH_RATE", 30)), seed: uint64(benchEnvInt(b, "FRESHQ_BENCH_SEED", 1)),
		length: time.Duration(minutes) * time.Minute, from: time.Duration(from) * time.Minute,
	}
	run.schedule = newFreshSchedule(run.seed, run.pages, run.length+time.Minute)
	run.requests = newFreshRequests(run.seed, run.schedule, run.rate, run.length)

	variants := []struct{ name, yaml string }{
		{"defaults (freshness, conditional_every 10)", "queue: {ready: {sweep_interval: 1s}}\n"},
		{"conditional_every 1", "queue: {ready: {sweep_interval: 1s}}\nfreshness: {conditional_every: 1}\n"},
		{"ready, conditional_every 1", "queue: {policy: ready, ready: {sweep_interval: 1s}}\nfreshness: {conditional_every: 1}\n"},
	}
	var nodes []*condNode
	for _, v := range variants {
		cn := &condNode{name: v.name, run: &freshPolicyRun{policy: v.name, serve: freePort(b), origin: newFreshOrigin(b, run.schedule, 1)}}
		yaml := fmt.Sprintf(`%ssupervisor: {shutdown_timeout: 3s}
render:
  renderer: %s
  timeout: 20s
  concurrency: %d
  domains: ["127.0.0.1"]
serve:
  listen: %s
  tokens: [crawl-token]
  wait: 20s
`, v.yaml, renderer, run.concurrency, cn.run.serve)
		cn.run.node = startNodeEvery(b, b.TempDir(), 2, run.interval, yaml, "")
		nodes = append(nodes, cn)
	}
	for _, cn := range nodes {
		waitFor(b, cn.name+" ready", 60*time.Second, cn.run.node.ready)
	}
	runs := make([]*freshPolicyRun, len(nodes))
	for i, cn := range nodes {
		runs[i] = cn.run
	}
	run.crawl(b, runs, func() {
		for _, cn := range nodes {
			cn.markWindow()
		}
	})
	for _, cn := range nodes {
		cn.endWindow()
	}
	reportConditional(run, renderer, nodes)
}

// needChromiumBench skips a benchmark that needs Chromium where there is none.
func needChromiumBench(b *testing.B) {
	if _, err := exec.LookPath("chromium"); err != nil {
		b.Skipf("no Chromium here (%v); apt-get install chromium", err)
	}
}

// condNode is one node of BenchmarkConditional and what it measured over the window.
type condNode struct {
	name string
	run  *freshPolicyRun
	// freshq's counters at the window's start and end, and the process tree's CPU in it
	before, after map[string]float64
	tree          *treeSampler
	cpu           float64
}

func (cn *condNode) markWindow() {
	cn.run.origin.markWindow()
	cn.before = cn.run.node.metrics()
	cn.tree = sampleTree(cn.run.node.cmd.Process.Pid)
}

func (cn *condNode) endWindow() {
	cn.cpu, _ = cn.tree.end()
	cn.after = cn.run.node.metrics()
}

// counts are the node's render attempts (every result worker 0 committed, a 304 included:
// freshq_claim_to_result_seconds' count; freshq_render_total counts a 304 with the http
// renderer, whose conditional GET is the render, but not a check made before a chrome render)
// and the checks answered 304 in the window.
func (cn *condNode) counts() (attempts, notModified, refused float64) {
	delta := func(name string) float64 { return cn.after[name] - cn.before[name] }
	return delta("freshq_claim_to_result_seconds_count"), delta(`freshq_render_conditional_total{result="not_modified"}`),
		delta(`freshq_render_conditional_total{result="refused"}`)
}

// origin is what the node's origin answered in the window: 200s and 304s.
func (cn *condNode) origin() (full, checks int64) {
	o := cn.run.origin
	for i := range o.full {
		full += o.full[i].Load() - o.fullFrom[i]
		checks += o.checks[i].Load() - o.checksFrom[i]
	}
	return full, checks
}

func reportConditional(run *freshBenchRun, renderer string, nodes []*condNode) {
	window := (run.length - run.from).Seconds()
	perHour := 3600 / window
	fmt.Printf("\nconditional GETs and change detection, %s renderer: %d pages, route interval %s, crawler %.0f requests/s, runs of %s measured from minute %d, seed %d\n",
		renderer, run.pages, run.interval, run.rate, run.length, int(run.from.Minutes()), run.seed)
	fmt.Println("| node | stale share (truth, window) | requests in window (not served) | render attempts | renders performed | renders avoided (304) | avoided share | renders performed/h | avoided/h | CPU s | CPU s per render performed | origin 200s (304s) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	type figures struct{ stale, performed, avoided, cpu float64 }
	got := make([]figures, len(nodes))
	for k, cn := range nodes {
		attempts, notModified, refused := cn.counts()
		avoided := notModified + refused // a 304 either way: no render was made for it
		performed := attempts - avoided
		full, checks := cn.origin()
		got[k] = figures{share(cn.run.stale, cn.run.fresh), performed, avoided, cn.cpu}
		fmt.Printf("| %s | %.1f %% | %d (%d) | %.0f | %.0f | %.0f | %.1f %% | %.0f | %.0f | %.1f | %.3f | %d (%d) |\n",
			cn.name, 100*got[k].stale, cn.run.stale+cn.run.fresh+cn.run.other, cn.run.other, attempts, performed, avoided,
			100*avoided/math.Max(attempts, 1), performed*perHour, avoided*perHour, cn.cpu, cn.cpu/math.Max(performed, 1), full, checks)
	}
	with, without, neither := got[0], got[1], got[2]
	fmt.Printf("conditional: renders avoided %.1f %% of the defaults' attempts (%.0f an hour), renders performed %.1f %% fewer than conditional_every 1, CPU %.1f s against %.1f s; stale share %.1f %% against %.1f %% with conditional_every 1\n",
		100*with.avoided/math.Max(with.performed+with.avoided, 1), with.avoided*perHour,
		100*(1-with.performed/math.Max(without.performed, 1)), with.cpu, without.cpu, 100*with.stale, 100*without.stale)
	fmt.Printf("conditional and change estimate: renders performed %.1f %% fewer than ready with conditional_every 1, CPU %.1f s against %.1f s; stale share %.1f %% against %.1f %%\n",
		100*(1-with.performed/math.Max(neither.performed, 1)), with.cpu, neither.cpu, 100*with.stale, 100*neither.stale)
}
