package shmmetrics

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/shm"
)

// The politeness series come from shared memory: the refused takes summed over every worker;
// freshq_host_paused for the 20 longest pauses of 25 paused hosts only; freshq_host_inflight
// for the 20 hosts of the table with the most host tokens held (ties: the most held back
// first), so a throttled host with none in flight is left out; and every series passes
// promlint.
func TestHostMetrics(t *testing.T) {
	s := metricsFixture(t, config.StoreBackendBadger, nil)
	now := time.Now().UnixMilli()
	h := s.seg.Hosts()
	for i := range 25 {
		h.Store(shm.HostState{Host: fmt.Sprintf("p%02d.example", i), PausedUntilMs: now + int64(i+1)*time.Hour.Milliseconds(), Cause: shm.HostCauseRetryAfter, Status: 429, SinceMs: now})
	}
	for i := range 3 {
		h.Store(shm.HostState{Host: fmt.Sprintf("t%d.example", i), Limit: 1, Cause: shm.HostCauseErrors, Status: 503, SinceMs: now})
	}
	for host, n := range map[string]int{"t0.example": 1, "t1.example": 3} {
		for i := range n {
			if _, ok := hosts.AdmitToken(s.seg.Leases(), shm.HostHash([]byte(host)), 4, uint64(i), now, time.Hour.Milliseconds(), 9); !ok {
				t.Fatal("no host token")
			}
		}
	}
	w0, _ := s.seg.Worker(0)
	w1, _ := s.seg.Worker(1)
	w0.Add(shm.CounterRenderRefusedHost, 2)
	w1.Add(shm.CounterRenderRefusedHost, 5)

	out := scrape(t, s)
	want := []string{"# TYPE freshq_host_inflight gauge", `freshq_host_inflight{host="t1.example"} 3`, `freshq_host_inflight{host="t0.example"} 1`}
	for i := 24; i >= 7; i-- {
		want = append(want, fmt.Sprintf(`freshq_host_inflight{host="p%02d.example"} 0`, i))
	}
	want = append(want, "# TYPE freshq_host_paused gauge")
	for i := 24; i >= 5; i-- {
		want = append(want, fmt.Sprintf(`freshq_host_paused{host="p%02d.example"} 1`, i))
	}
	want = append(want, "# TYPE freshq_hosts_tracked gauge", "freshq_hosts_tracked 28",
		"# TYPE freshq_render_refused_total counter", `freshq_render_refused_total{cause="host"} 7`)
	got := hostLines(out)
	if strings.Join(sortedSeries(got), "\n") != strings.Join(sortedSeries(want), "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	problems, err := promlint.New(strings.NewReader(out)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// An empty host table exposes no per-host series, and the refused counter at 0.
func TestHostMetricsEmpty(t *testing.T) {
	out := scrape(t, metricsFixture(t, config.StoreBackendBadger, nil))
	got := strings.Join(hostLines(out), "\n")
	want := "# TYPE freshq_hosts_tracked gauge\nfreshq_hosts_tracked 0\n# TYPE freshq_render_refused_total counter\nfreshq_render_refused_total{cause=\"host\"} 0"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// hostLines are the politeness lines of a scrape but their HELP.
func hostLines(out string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "# HELP") && (strings.Contains(l, "freshq_host") || strings.Contains(l, "freshq_render_refused_total")) {
			got = append(got, l)
		}
	}
	return got
}

// sortedSeries is lines with each family's samples in a set order: the exposition sorts a
// family's samples by label value, so the test's order (by rank) is compared as a set while
// its length still counts the hosts.
func sortedSeries(lines []string) []string {
	out := append([]string(nil), lines...)
	start := 0
	for i := 0; i <= len(out); i++ {
		if i == len(out) || strings.HasPrefix(out[i], "#") {
			slices.Sort(out[start:i])
			start = i + 1
		}
	}
	return out
}
