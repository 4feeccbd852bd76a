package capacity

import (
	"testing"

	"github.com/freshq/freshq/freshness"
)

// TestTuneFreshnessPlansStillPagesAtTheirCeiling: the water-filling bounds each page by the
// ceiling the Applier files it at, a still page's (freshness.Still) included. Pages whose
// stretched ceilings alone ask for more than the budget (ν at MaxThreshold: every row filed
// at its ceiling, as ready renders them) leave part of it to ν once some are seen unchanged
// over their interval: their renders move to the pages that change.
func TestTuneFreshnessPlansStillPagesAtTheirCeiling(t *testing.T) {
	in := halfCapacityInput()
	for i := range in.Pages {
		in.Pages[i].CadenceMs = 24 * hourMs
	}
	alike, _ := TuneFreshness(in)
	for i := range in.Pages {
		if in.Pages[i].Lambda < 0.01 { // the pages that barely change: seen unchanged for 10 days
			in.Pages[i].History = freshness.History{UnchangedHours: 240}
		}
	}
	still, _ := TuneFreshness(in)
	t.Logf("stretch %v; ν %v with no page still, %v with two", alike.Stretch, alike.Nu, still.Nu)
	if alike.Nu != freshness.MaxThreshold || !(still.Nu < freshness.MaxThreshold) {
		t.Errorf("ν %v with no page still, %v with two seen unchanged: want every page at its ceiling, then room for ν", alike.Nu, still.Nu)
	}
}
