package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/freshq/freshq/internal/invariants"
)

// TestCapacityProjectionMatchesSimulator runs the tests' small corpus under every standard
// scenario and checks that the capacity projection (capacity.Project, from the corpus's demand
// and the renders each farm completed) predicts the measured age ÷ cadence of every class under
// `ready` within 10 %, at 100, 75 and 50 % capacity.
func TestCapacityProjectionMatchesSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator")
	}
	rep := standardReport(t)
	checks := rep.CapacityChecks()
	if len(checks) != 9 {
		t.Fatalf("%d checks, want ready b=1, b=2 and ready+lanes at three capacities", len(checks))
	}
	for _, cc := range checks {
		for k := range cc.Classes {
			t.Logf("%-11s %3.0f %% %-40s predicted %.3f measured %.3f", cc.Scenario.Name, 100*cc.Scenario.Capacity, cc.Classes[k], cc.Predicted[k], cc.Measured[k])
		}
	}
	// Under the race detector the tests warm up two days only (engine_test.go): at half capacity
	// a discovered product page is rendered every ~140 h, so the window still holds the start's
	// transient, not the steady state the projection is of. There the 50 % rows are only
	// logged; without -race, and in `make sim`, every capacity is checked.
	gated := checks
	if invariants.Race {
		gated = nil
		for _, cc := range checks {
			if cc.Scenario.Capacity >= 0.75 {
				gated = append(gated, cc)
			}
		}
	}
	worst, where := WorstReadyGap(gated)
	if worst > 0.10 || math.IsNaN(worst) {
		t.Errorf("worst ready gap %.1f %% (%s), want ≤ 10 %%", 100*worst, where)
	}
	// The projection is not a copy of the measurement: at half capacity it must predict pages
	// well past on time, as the simulator measures.
	for _, cc := range checks {
		if cc.Scenario.Capacity == 0.5 && cc.Scenario.Name == "ready b=1" && cc.Predicted[0] < 1.5 {
			t.Errorf("ready b=1 at 50 %%: predicted %v for %s, want past 1.5", cc.Predicted[0], cc.Classes[0])
		}
	}
	if s := rep.CapacitySection(); !strings.Contains(s, "| 50 % | ready b=2 |") || !strings.Contains(s, "The worst gap for `ready`") {
		t.Errorf("the section lacks its rows or its verdict:\n%s", s)
	}
}
