package fuzz

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/freshq/freshq/wire"
)

// FuzzCapacityDecode feeds arbitrary bodies to the supervisor's decoder of worker 0's capacity
// view (GET /internal/capacity): never a panic; an accepted view re-encodes and decodes to the
// same view; a body past wire.MaxCapacityBody is never read whole.
func FuzzCapacityDecode(f *testing.F) {
	var v wire.Capacity
	v.NowMs = 1_800_000_000_000
	v.Demand.Total, v.Demand.Rows = 0.25, 9000
	v.Demand.ByLane = map[string]float64{"urgent": 0, "submitted": 0.2, "discovered": 0.05, "cold": 0}
	v.Demand.ByRoute = map[string]float64{"": 0.01, "catalog": 0.24}
	v.Capacity.PerSecond, v.Capacity.RetryShare, v.Capacity.WindowS = 0.2, 0.03, 900
	v.Projection.ByLane = map[string]float64{"submitted": 1.2, "discovered": 1.4}
	v.Projection.Verdict, v.Projection.DrainSeconds = "falling behind by 180 renders/h", -1
	full, err := json.Marshal(v)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	for _, n := range []int{0, 1, len(full) / 3, len(full) / 2, len(full) - 1} {
		f.Add(full[:n]) // cut mid-view, as a worker 0 killed mid-answer leaves it
	}
	f.Add([]byte(`{"demand": {"by_lane": {"submitted": "x"}}}`))
	f.Add([]byte(`{"demand": {"total": 1e400}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := wire.DecodeCapacity(bytes.NewReader(body))
		if err != nil {
			return
		}
		canon, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("a decoded view does not encode: %v", err)
		}
		again, err := wire.DecodeCapacity(bytes.NewReader(canon))
		if err != nil || !reflect.DeepEqual(got, again) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, got, again)
		}
	})
}

// TestCapacityDecodeBounded: a view larger than wire.MaxCapacityBody is refused, not read whole.
func TestCapacityDecodeBounded(t *testing.T) {
	big := `{"demand": {"by_route": {"` + strings.Repeat("a", wire.MaxCapacityBody) + `": 1}}}`
	if _, err := wire.DecodeCapacity(strings.NewReader(big)); err == nil {
		t.Fatal("a view past the bound was accepted")
	}
}
