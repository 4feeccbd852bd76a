package freshness

import "testing"

// A row filed at its crossing ranks by at most the ceiling it was filed under. A page whose
// value has nearly saturated when it crosses ν (it changes many times an interval and is asked
// little: h′ tiny, ν ÷ h′ days) would otherwise rank behind every row at its ceiling, and once
// capacity goes to the rows worth most wait past that ceiling (the simulator's held-out
// product route at full capacity: 1.76× its interval against ready's 1.45×).
func TestCrossingRowRanksNoSlowerThanTheCeiling(t *testing.T) {
	const baseMs, maxMs, minMs = 48 * msPerHour, 70 * msPerHour, 3 * msPerHour
	const lambda, mu, nu = 4.0, 1.0, 0.245 // h saturates at μ/λ = 0.25
	cross, iv := DueAfter(lambda, mu, nu, minMs, maxMs, 0)
	if cross == 0 {
		t.Fatal("the page does not reach ν within its ceiling: pick another")
	}
	raw := nu / Slope(lambda, mu, iv) * msPerHour
	if !(raw > baseMs) {
		t.Fatalf("ν ÷ h′ is %g ms, within the route's interval: the test checks nothing", raw)
	}
	if !(raw > maxMs) {
		t.Fatalf("ν ÷ h′ is %g ms, within the ceiling: the test checks nothing", raw)
	}
	if r := RankInterval(lambda, mu, nu, cross, iv, baseMs, maxMs); r != maxMs {
		t.Errorf("a saturated row at its crossing ranks by %d ms (ν ÷ h′ = %.0f ms), want at most its ceiling %d", r, raw, int64(maxMs))
	}
}
