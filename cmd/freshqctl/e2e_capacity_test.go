package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/top"
	"github.com/freshq/freshq/wire"
)

// TestCapacityAgainstARunningSupervisor drives capacity planning through the built binaries:
// targets filed over the API show up as demand in /v1/queue's capacity section and in
// /metrics, the sim renderer's renders as capacity, a delete takes its row's demand away, and
// `freshqctl plan` reports what a shorter catalog cadence would do; a file that does not load
// is refused with its line.
func TestCapacityAgainstARunningSupervisor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	server := startSupervisor(t, "  domains: [shop.test]\n")
	var ndjson strings.Builder
	for i := range 200 {
		fmt.Fprintf(&ndjson, "{\"url\":\"https://shop.test/c/k-%d\"}\n", i) // catalog: 24 h
	}
	for i := range 50 {
		fmt.Fprintf(&ndjson, "{\"url\":\"https://shop.test/x/k-%d\",\"interval\":\"6h\"}\n", i) // no route: its own 6 h
	}
	wantExit(t, ctl(t, server, ndjson.String(), "import", "-"), 0, "")

	const dayMs = 24 * 3600 * 1000.0
	queue := func() wire.Capacity {
		var q wire.QueueView
		r := ctl(t, server, "", "queue", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &q); err != nil || q.Capacity == nil {
			t.Fatalf("queue --json %q: %v", r.stdout, err)
		}
		return *q.Capacity
	}
	var c wire.Capacity
	waitFor(t, "every target rendered and counted", 30*time.Second, func() bool {
		c = queue()
		return c.Demand.Rows == 250 && c.Demand.ByLane["cold"] == 0 && c.Capacity.PerSecond > 0
	})
	want := (200/dayMs + 50/(dayMs/4)) * 1000
	if !closeTo(c.Demand.Total, want) || !closeTo(c.Demand.ByRoute["catalog"], 200/dayMs*1000) || !closeTo(c.Demand.ByLane["submitted"], want) {
		t.Fatalf("demand %+v, want %v renders/s in all (catalog %v)", c.Demand, want, 200/dayMs*1000)
	}
	if c.Projection.Verdict == "" || c.Projection.ByLane["submitted"] < 1 || c.RecountedAtMs == 0 {
		t.Fatalf("projection %+v, recounted at %d", c.Projection, c.RecountedAtMs)
	}

	// The metrics the supervisor serves carry worker 0's figures.
	resp, err := http.Get(server + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	samples, err := top.ParseMetrics(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range samples {
		got[s.Name+"/"+s.Labels["lane"]] = s.Value
	}
	if !closeTo(got["freshq_demand_renders_per_second/submitted"], want) || got["freshq_capacity_renders_per_second/"] <= 0 ||
		got["freshq_projected_lateness_ratio/submitted"] < 1 {
		t.Fatalf("metrics: demand %v (want %v), capacity %v, projected %v", got["freshq_demand_renders_per_second/submitted"], want,
			got["freshq_capacity_renders_per_second/"], got["freshq_projected_lateness_ratio/submitted"])
	}

	// top's header carries the same view.
	r := ctl(t, server, "", "top", "--once")
	wantExit(t, r, 0, "")
	if !strings.Contains(r.stdout, "\ncapacity ") || !strings.Contains(r.stdout, "/s  demand 0.00463/s\nkeeping up\n") || !strings.Contains(r.stdout, "projected × cadence: submitted 1.00") {
		t.Fatalf("top --once:\n%s", r.stdout)
	}

	// A delete takes its row's demand away at once.
	for i := range 10 {
		wantExit(t, ctl(t, server, "", "delete", fmt.Sprintf("https://shop.test/c/k-%d", i)), 0, "")
	}
	c = queue()
	if want := (190/dayMs + 50/(dayMs/4)) * 1000; c.Demand.Rows != 240 || !closeTo(c.Demand.Total, want) {
		t.Fatalf("after deleting 10: %d rows, %v renders/s, want 240 and %v", c.Demand.Rows, c.Demand.Total, want)
	}

	// plan: the catalog at 6 h asks four times its renders: 190 + 50 rows at 6 h against
	// 190 at 24 h and 50 at 6 h, 0.0045 → 0.0111 renders/s.
	dir := t.TempDir()
	next := filepath.Join(dir, "next.yaml")
	os.WriteFile(next, []byte("routes:\n  - {name: catalog, match: prefix, path: /c/, interval: 6h}\n"), 0o600)
	r = ctl(t, server, "", "plan", "--config", next)
	wantExit(t, r, 0, "")
	for _, want := range []string{"current demand 0.005/s over 240 rows", "routes: /c/ 24h → 6h: demand +300 %, projected catalog lateness 1.0× → 1.0×", "total: demand 0.005/s → 0.011/s (+146 %)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, r.stdout)
		}
	}
	// Nothing changed: plan is read-only.
	if c2 := queue(); c2.Demand.Total != c.Demand.Total {
		t.Fatalf("demand moved after plan: %v → %v", c.Demand.Total, c2.Demand.Total)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("render:\n  default_interval: 24h\nroutes: ! \n"), 0o600)
	r = ctl(t, server, "", "plan", "--config", bad)
	if r.code != 1 || !strings.Contains(r.stderr, "line 3") || !strings.Contains(r.stderr, "body") {
		t.Fatalf("plan of a bad file: %+v", r)
	}
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }
