package api

import (
	"github.com/freshq/freshq/apply"
	"testing"
)

// /v1/queue's freshness section shows the last 15 minutes beside the totals: requests counted
// before the window are in the totals only.
func TestQueueFreshnessWindow(t *testing.T) {
	now := int64(1_700_000_000_000)
	m := &apply.StaleMeter{Now: func() int64 { return now }}
	q := &Queue{Stale: m}
	m.Add(100, 90)
	now += 30 * 60_000
	m.Add(40, 10)
	f := q.freshness()
	if f.ServedRequests != 140 || f.StaleRequests != 100 {
		t.Fatalf("totals: %+v", f)
	}
	if f.WindowS != 900 || f.WindowServedRequests != 40 || f.WindowStaleRequests != 10 || f.WindowStaleShare != 0.25 {
		t.Fatalf("window: %+v; want 900 s, 40 served, 10 stale, 0.25", f)
	}
}
