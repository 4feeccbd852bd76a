package leases

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// A job crosses the control socket whole: every field a render worker acts on, the checkable
// hint included, comes back from its JSON as worker 0 granted it.
func TestClaimJobRoundTripsThroughTheWire(t *testing.T) {
	for _, j := range []claim.Job{
		{Key: []byte("desktop|https://a.test/p/1"), KeyHash: 7, DueAtMs: 1_000, CadenceMs: 3_600_000, Submitted: true,
			Checkable: true, Lane: policy.LaneSubmitted, Score: 2.5, Source: claim.SourceReady,
			Lease: shm.Lease{Slot: 3, State: 1 << 40, KeyHash: 7}, HostToken: shm.Lease{Slot: 1, State: 9, KeyHash: 11}},
		{Key: []byte("mobile|https://a.test/"), KeyHash: 8, Source: claim.SourceIndex, Lease: shm.Lease{Slot: 4, State: 2, KeyHash: 8}},
	} {
		b, err := json.Marshal(WireJob(j))
		if err != nil {
			t.Fatal(err)
		}
		var wj wire.Job
		if err := json.Unmarshal(b, &wj); err != nil {
			t.Fatal(err)
		}
		if back := ClaimJob(wj); !reflect.DeepEqual(back, j) {
			t.Fatalf("job %+v came back as %+v (JSON %s)", j, back, b)
		}
	}
}
