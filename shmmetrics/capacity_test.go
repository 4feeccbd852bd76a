package shmmetrics

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/wire"
)

// capacityAt is worker 0's capacity view in the tests below.
func capacityAt() wire.Capacity {
	var v wire.Capacity
	v.Demand.Total = 0.25
	v.Demand.ByLane = map[string]float64{"urgent": 0, "submitted": 0.2, "discovered": 0.05, "cold": 0}
	v.Capacity.PerSecond = 0.125
	v.Projection.ByLane = map[string]float64{"urgent": 1, "submitted": 1.5, "discovered": 2.25, "cold": 1}
	return v
}

// The capacity series are worker 0's figures, read from its capacity view at the scrape; they
// pass Prometheus' lint; with worker 0 down they are absent, not stale.
func TestCapacityMetrics(t *testing.T) {
	s := metricsFixture(t, config.StoreBackendBadger, nil)
	ln, err := net.Listen("unix", s.socket)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+wire.PathCapacity, func(w http.ResponseWriter, _ *http.Request) { wire.WriteJSON(w, 200, capacityAt()) })
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	out := scrape(t, s)
	for _, want := range []string{
		`freshq_demand_renders_per_second{lane="submitted"} 0.2`, `freshq_demand_renders_per_second{lane="discovered"} 0.05`,
		"freshq_capacity_renders_per_second 0.125",
		`freshq_projected_lateness_ratio{lane="discovered"} 2.25`, `freshq_projected_lateness_ratio{lane="submitted"} 1.5`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	problems, err := promlint.New(strings.NewReader(out)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	srv.Close()
	out = scrape(t, s)
	for _, name := range []string{"freshq_demand_renders_per_second", "freshq_capacity_renders_per_second", "freshq_projected_lateness_ratio"} {
		if strings.Contains(out, name) {
			t.Errorf("worker 0 down: %s exposed", name)
		}
	}
}
