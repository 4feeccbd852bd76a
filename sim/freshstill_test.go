package sim

import "testing"

// TestStillPagesYieldTheirRenders: under scarcity, production's freshness files a page seen
// unchanged at every render over its route's interval at a still page's ceiling
// (freshness.Tuning.StillStretchFor), so the pages that never change yield renders to the
// others: on 2,000 keys at 50 %, 466 renders of them in the 96-hour window against ready's 819
// (0.57×; with the still ceiling at the route's, StillStretchFactor 1, they kept 611, 0.75×,
// and the stale share was 19.4 % against 18.4 %). A third is not reached: a 48-hour page's
// still ceiling is longer than the window, and a popular page that never changed still crosses
// ν before it, its estimated rate held above 0 by its route's prior (480 simulated hours:
// 0.42× against 0.74×). It serves fewer stale requests than ready.
func TestStillPagesYieldTheirRenders(t *testing.T) {
	rows := smallFresh(t, 2000, 0.5, StandardTruth)
	var ready, fresh *FreshRow
	for i := range rows {
		switch rows[i].Policy {
		case "ready":
			ready = &rows[i]
		case "freshness":
			fresh = &rows[i]
		}
	}
	if ready == nil || fresh == nil || ready.StillRenders == 0 {
		t.Fatalf("ready %+v, freshness %+v: nothing to compare", ready, fresh)
	}
	t.Logf("renders of never-changing pages: freshness %d, ready %d (%.2f×); stale %.1f %% against %.1f %%; still intervals %v, ceilings %v; ready's longest %v, freshness's %v",
		fresh.StillRenders, ready.StillRenders, float64(fresh.StillRenders)/float64(ready.StillRenders),
		100*fresh.StaleShare, 100*ready.StaleShare, fresh.RouteMaxStill, fresh.Ceiling, ready.RouteMax, fresh.RouteMax)
	if 5*fresh.StillRenders > 3*ready.StillRenders {
		t.Errorf("pages that never change rendered %d times under freshness, %d under ready: want at most 3/5", fresh.StillRenders, ready.StillRenders)
	}
	if fresh.StaleShare >= ready.StaleShare {
		t.Errorf("freshness served %.1f %% stale, ready %.1f %%", 100*fresh.StaleShare, 100*ready.StaleShare)
	}
}
