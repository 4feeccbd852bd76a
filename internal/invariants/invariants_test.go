package invariants

import "testing"

// Race implies Enabled: a race build always runs the self-checks.
func TestRaceImpliesEnabled(t *testing.T) {
	if Race && !Enabled {
		t.Fatal("a race build with the self-checks off")
	}
}
