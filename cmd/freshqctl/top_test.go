package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/top"
	"github.com/freshq/freshq/wire"
)

// metricsText is a /metrics answer: submitted lane with grants spread over the buckets.
func metricsText(renders, grants int) string {
	var b strings.Builder
	b.WriteString("# HELP freshq_backlog Due rows at the last sweep, by lane.\n# TYPE freshq_backlog gauge\n")
	for lane, v := range map[string]int{"urgent": 0, "submitted": 12000, "discovered": 40, "cold": 3} {
		fmt.Fprintf(&b, "freshq_backlog{lane=%q} %d\n", lane, v)
	}
	bounds := []string{"0.1", "0.5", "1", "1.5", "2", "3", "5", "10", "50", "+Inf"}
	// submitted: of every 10 grants, 5 ≤0.1, 3 ≤0.5, 2 >50.
	share := []int{5, 8, 8, 8, 8, 8, 8, 8, 8, 10}
	for i, le := range bounds {
		fmt.Fprintf(&b, "freshq_lateness_ratio_bucket{lane=\"submitted\",le=%q} %d\n", le, grants*share[i]/10)
		fmt.Fprintf(&b, "freshq_lateness_ratio_bucket{lane=\"cold\",le=%q} 0\n", le)
	}
	fmt.Fprintf(&b, "freshq_lateness_ratio_sum{lane=\"submitted\"} %g\nfreshq_lateness_ratio_count{lane=\"submitted\"} %d\n", float64(grants)*0.5, grants)
	b.WriteString("freshq_lateness_ratio_sum{lane=\"cold\"} 0\nfreshq_lateness_ratio_count{lane=\"cold\"} 0\n")
	fmt.Fprintf(&b, "freshq_render_total{outcome=\"ok\"} %d\nfreshq_render_total{outcome=\"timeout\"} %d\n", renders*9/10, renders/10)
	b.WriteString("freshq_leases_live 8\nfreshq_ready_published 1200\nfreshq_floor_pinned_seconds 3.2\nfreshq_below_floor 0\n")
	b.WriteString("freshq_worker_restarts_total{worker=\"0\"} 0\nfreshq_worker_restarts_total{worker=\"1\"} 1\n")
	b.WriteString("freshq_claim_granted_total{source=\"ready\"} 5 1700000000000\n")
	return b.String()
}

func TestMakeFrame(t *testing.T) {
	parse := func(text string, at time.Time) *top.Scrape {
		s, err := top.ParseMetrics(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return top.NewScrape(s, at)
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	first := parse(metricsText(1000, 100), t0)
	f := top.MakeFrame(first, nil)
	if f.Window != "since start" || f.RenderRate != nil || *f.OKShare != 0.9 || f.Restarts != 1 || len(f.Lanes) != 4 {
		t.Fatalf("first frame %+v", f)
	}
	sub := f.Lanes[1]
	if sub.Lane != "submitted" || sub.Backlog != 12000 || sub.Grants != 100 || *sub.P50 != 0.1 || !sub.P90Inf || *sub.Mean != 0.5 || math.Abs(*sub.Late-0.2) > 1e-9 {
		t.Fatalf("submitted %+v", sub)
	}
	if f.Lanes[3].P50 != nil || f.Lanes[3].GrantRate != nil {
		t.Fatalf("cold %+v", f.Lanes[3])
	}
	second := parse(metricsText(3000, 300), t0.Add(2*time.Second))
	f = top.MakeFrame(second, first)
	if f.Window != "last 2s" || *f.RenderRate != 1000 || *f.Lanes[1].GrantRate != 100 || *f.Lanes[0].GrantRate != 0 {
		t.Fatalf("second frame %+v %+v", f, f.Lanes[1])
	}
	var b strings.Builder
	a := &app{server: "http://127.0.0.1:8420"}
	top.Print(&b, a.server, f, 2*time.Second, true)
	out := b.String()
	fits(t, out)
	for _, want := range []string{"127.0.0.1:8420  12:00:02Z  every 2s, Ctrl-C quits", "renders 3000 (1000.0/s), 90.0% ok  leases 8  ready 1200  floor pinned 3s",
		"worker restarts 1", "(last 2s)", "submitted       12000        300    100.0   0.10    >50   0.50    20%",
		"cold                3          0      0.0      -      -      -      -"} {
		if !strings.Contains(out, want) {
			t.Errorf("frame lacks %q:\n%s", want, out)
		}
	}
}

func TestTop(t *testing.T) {
	var mu sync.Mutex
	n := 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFake(t, map[string]http.HandlerFunc{"GET /metrics": func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		if k == 3 {
			cancel() // Ctrl-C during the third scrape
		}
		fmt.Fprint(w, metricsText(1000*k, 100*k))
	}})
	r := at(t, f.srv, "top", "--once")
	wantExit(t, r, 0, "")
	if !strings.Contains(r.stdout, "submitted       12000        100        -   0.10    >50") {
		t.Fatalf("top --once:\n%s", r.stdout)
	}
	fits(t, r.stdout)
	r = at(t, f.srv, "top", "--once", "--json")
	var fr top.Frame
	if err := json.Unmarshal([]byte(r.stdout), &fr); err != nil || len(fr.Lanes) != 4 || fr.Lanes[1].Backlog != 12000 {
		t.Fatalf("--json %q: %v", r.stdout, err)
	}

	// Refreshing until Ctrl-C, exit 0; without a terminal, frames follow each other.
	mu.Lock()
	n = 0
	mu.Unlock()
	var out, errb strings.Builder
	code := run(ctx, []string{"--server", f.srv.URL, "top", "--interval", "100ms"}, nil, &out, &errb, func(string) string { return "" }, terminals{})
	if code != 0 || strings.Count(out.String(), "freshq top") < 2 || !strings.Contains(out.String(), "GRANTS") {
		t.Fatalf("exit %d stdout:\n%s\nstderr %s", code, out.String(), errb.String())
	}
}

func TestTopRedrawsOnATerminal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	n := 0
	f := newFake(t, map[string]http.HandlerFunc{"GET /metrics": func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		if n == 2 {
			cancel()
		}
		mu.Unlock()
		fmt.Fprint(w, metricsText(1000, 100))
	}})
	var out, errb strings.Builder
	code := run(ctx, []string{"--server", f.srv.URL, "top", "--interval", "100ms"}, nil, &out, &errb, func(string) string { return "" }, terminals{stdout: true})
	if code != 0 || !strings.HasPrefix(out.String(), "\x1b[H\x1b[2Jfreshq top") || !strings.Contains(out.String(), "Ctrl-C quits") {
		t.Fatalf("exit %d stdout %q", code, out.String())
	}
}

// TestTopShowsCapacity: top's header carries worker 0's capacity view from /v1/queue — the
// capacity, the demand, the verdict and the projected lateness of the lanes with demand — and
// a server without it still gets its frame.
// queueFake is a server whose /metrics shows 1,000 renders and whose /v1/queue answers v.
func queueFake(t *testing.T, v wire.QueueView) *fake {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return newFake(t, map[string]http.HandlerFunc{
		"GET /metrics":  func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, metricsText(1000, 100)) },
		"GET /v1/queue": func(w http.ResponseWriter, r *http.Request) { w.Write(body) },
	})
}

func TestTopShowsCapacity(t *testing.T) {
	var v wire.QueueView
	c := &wire.Capacity{}
	c.Capacity.PerSecond, c.Capacity.RetryShare = 0.2, 0.05
	c.Demand.Total = 0.25
	c.Demand.ByLane = map[string]float64{"submitted": 0.2, "discovered": 0.05, "urgent": 0, "cold": 0}
	c.Projection.ByLane = map[string]float64{"submitted": 1.21, "discovered": 1.42, "urgent": 1, "cold": 1}
	c.Projection.Verdict, c.Projection.DrainSeconds = "falling behind by 216 renders/h", -1
	v.Capacity = c
	f := queueFake(t, v)
	r := at(t, f.srv, "top", "--once")
	wantExit(t, r, 0, "")
	for _, want := range []string{"capacity 0.2/s (5% retries/rechecks)  demand 0.25/s\nfalling behind by 216 renders/h\n",
		"projected × cadence: submitted 1.21 discovered 1.42\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("top --once lacks %q:\n%s", want, r.stdout)
		}
	}
	fits(t, r.stdout)
	r = at(t, f.srv, "top", "--once", "--json")
	var fr top.Frame
	if err := json.Unmarshal([]byte(r.stdout), &fr); err != nil || fr.Capacity == nil || fr.Capacity.Demand.Total != 0.25 {
		t.Fatalf("--json %q: %v", r.stdout, err)
	}
}

// In a cluster, top says which share of every host's limit the node holds; alone, nothing.
func TestTopShowsTheFarm(t *testing.T) {
	var v wire.QueueView
	v.Cluster = &wire.QueueCluster{Node: "node-b", Farm: &wire.QueueFarm{Index: 1, Nodes: 3}}
	f := queueFake(t, v)
	r := at(t, f.srv, "top", "--once")
	wantExit(t, r, 0, "")
	if want := "farm: node 2 of 3 live nodes, each host's limit divided among them\n"; !strings.Contains(r.stdout, want) {
		t.Fatalf("top --once lacks %q:\n%s", want, r.stdout)
	}
	fits(t, r.stdout)
	if l := top.FarmLine(&wire.QueueFarm{}); !strings.Contains(l, "no share") {
		t.Fatalf("a node not among the live ones: %q", l)
	}
	if l := top.FarmLine(nil); l != "" {
		t.Fatalf("a node alone: %q", l)
	}
}

// top shows the measured share of requests served stale once some were counted.
func TestTopFreshnessLine(t *testing.T) {
	if l := top.FreshnessLine(nil); l != "" {
		t.Fatalf("no section: %q", l)
	}
	if l := top.FreshnessLine(&wire.QueueFreshness{Policy: "ready"}); l != "" {
		t.Fatalf("nothing counted: %q", l)
	}
	if l := top.FreshnessLine(&wire.QueueFreshness{Policy: "freshness", ServedRequests: 200, StaleRequests: 25, StaleShare: 0.125}); l != "served stale 12.5% of 200 crawler requests (policy freshness)" {
		t.Fatalf("line %q", l)
	}
}

// farmQueue is a /v1/queue answer of node-b in a farm of three: node-a and node-b published
// their figures, node-c's are unknown; the sum and its projection as the worker computes them.
func farmQueue() wire.QueueView {
	var v wire.QueueView
	fc := &wire.FarmCapacity{Nodes: 3, Reporting: 2, Unknown: []string{"node-c"}, PerNode: []wire.FarmNode{
		{ID: "node-a", Capacity: &wire.NodeCapacity{Shards: 11, DemandPerSecond: 0.75, CapacityPerSecond: 0.6, RetryShare: 0.1, Backlog: 10, Renders: 540}},
		{ID: "node-b", Capacity: &wire.NodeCapacity{Shards: 10, DemandPerSecond: 0.25, CapacityPerSecond: 0.3, RecheckShare: 0.2, Backlog: 5, Renders: 270}},
		{ID: "node-c"},
	}}
	fc.Demand.Total, fc.Demand.ByLane = 1, map[string]float64{"submitted": 0.75, "discovered": 0.25}
	fc.Capacity.Capacity.PerSecond, fc.Capacity.Capacity.RetryShare, fc.Capacity.Capacity.RecheckShare = 0.9, 0.06/0.9, 0.06/0.9
	fc.Capacity.Capacity.Renders, fc.Projection.Backlog = 810, 15
	fc.Projection.ByLane = map[string]float64{"submitted": 1.12, "discovered": 1.24}
	fc.Projection.Verdict, fc.Projection.DrainSeconds = "falling behind by 792 renders/h", -1
	v.Cluster = &wire.QueueCluster{Node: "node-b", Farm: &wire.QueueFarm{Index: 1, Nodes: 3}, Capacity: fc}
	return v
}

// TestTopCluster: top --cluster prints the farm table — one line per live node with the
// figures it published, unknown ones said so and left out of the sum, the sum, the farm's
// verdict and its projection by lane — within 80 columns, and --json carries the farm; plain
// top does not print it; on a node in no cluster, --cluster says so.
func TestTopCluster(t *testing.T) {
	f := queueFake(t, farmQueue())
	r := at(t, f.srv, "top", "--once", "--cluster")
	wantExit(t, r, 0, "")
	for _, want := range []string{
		"\nFARM             SHARDS   DEMAND/s CAPACITY/s   RETRY   BACKLOG   RENDERS\n",
		"node-a               11       0.75        0.6     10%        10       540\n",
		"node-b               10       0.25        0.3     20%         5       270\n",
		"node-c           unknown: no figures published (an older version, or not yet)\n",
		"sum (2 of 3)                   1.0        0.9     13%        15       810\n",
		"farm: falling behind by 792 renders/h\n",
		"farm projected × cadence: submitted 1.12 discovered 1.24\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("top --once --cluster lacks %q:\n%s", want, r.stdout)
		}
	}
	fits(t, r.stdout)
	r = at(t, f.srv, "top", "--once", "--cluster", "--json")
	var fr top.Frame
	if err := json.Unmarshal([]byte(r.stdout), &fr); err != nil || fr.FarmCapacity == nil || fr.FarmCapacity.Reporting != 2 || fr.FarmCapacity.Capacity.Capacity.Renders != 810 {
		t.Fatalf("--json %q: %v", r.stdout, err)
	}
	if r := at(t, f.srv, "top", "--once"); strings.Contains(r.stdout, "FARM") {
		t.Fatalf("top without --cluster prints the farm table:\n%s", r.stdout)
	}
	alone := queueFake(t, wire.QueueView{})
	if r := at(t, alone.srv, "top", "--once", "--cluster"); !strings.Contains(r.stdout, "farm: this node is in no cluster") {
		t.Fatalf("top --cluster on Badger:\n%s", r.stdout)
	}
}
