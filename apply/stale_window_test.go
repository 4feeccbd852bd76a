package apply

import "testing"

// The stale meter keeps the last 15 minutes apart from the totals: requests counted 20 minutes
// ago are in the totals and out of the window, those of the last minutes in both; a meter
// without a clock keeps the totals only.
func TestStaleMeterWindow(t *testing.T) {
	now := int64(1_700_000_000_000)
	m := &StaleMeter{Now: func() int64 { return now }}
	m.Add(100, 80) // a first pass, mostly stale
	now += 20 * 60_000
	m.Add(50, 10)
	now += 5 * 60_000
	m.Add(50, 10)
	served, stale := m.Totals()
	if served != 200 || stale != 100 {
		t.Fatalf("totals %v served, %v stale; want 200, 100", served, stale)
	}
	ws, wst := m.Window()
	if ws != 100 || wst != 20 {
		t.Fatalf("window %v served, %v stale; want the last 15 minutes' 100, 20", ws, wst)
	}
	now += 11 * 60_000 // the second batch, 16 minutes old, leaves the window
	if ws, wst = m.Window(); ws != 50 || wst != 10 {
		t.Fatalf("window %v served, %v stale after 11 more minutes; want 50, 10", ws, wst)
	}
	bare := &StaleMeter{}
	bare.Add(10, 5)
	if ws, wst := bare.Window(); ws != 0 || wst != 0 {
		t.Fatalf("a meter without a clock has a window: %v, %v", ws, wst)
	}
	if s, st := bare.Totals(); s != 10 || st != 5 {
		t.Fatalf("a meter without a clock: totals %v, %v", s, st)
	}
}
