package api

import (
	"github.com/freshq/freshq/apply"
	"testing"
)

// /v1/queue's freshness section is the measured share of requests served stale; absent
// without a meter, zero until a request was counted.
func TestQueueFreshnessSection(t *testing.T) {
	if f := (&Queue{}).freshness(); f != nil {
		t.Fatalf("without a meter: %+v", f)
	}
	m := &apply.StaleMeter{}
	q := &Queue{Stale: m}
	if f := q.freshness(); f == nil || f.StaleShare != 0 || f.ServedRequests != 0 {
		t.Fatalf("nothing counted: %+v", f)
	}
	m.Add(10, 2.5)
	m.Add(30, 0)
	if f := q.freshness(); f.ServedRequests != 40 || f.StaleRequests != 2.5 || f.StaleShare != 2.5/40 {
		t.Fatalf("counted: %+v", f)
	}
}
