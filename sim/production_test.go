package sim

import (
	"math"
	"testing"
)

// TestFitRecoversKnownShares: rows made from known demand shares and a known other share
// (each class's ratio chosen, the product ratio solved from the balance) give them back.
func TestFitRecoversKnownShares(t *testing.T) {
	sh, sk, other := 0.02, 0.2, 0.07
	sp := 1 - sh - sk
	var rows []ProductionRow
	for _, r := range []struct{ c, h, k float64 }{{1, 3, 1.2}, {1, 1, 1}, {0.5, 30, 4}, {0.5, 4, 1.5}} {
		// s_h/h + s_k/k + s_p/p = c(1 − other)
		p := sp / (r.c*(1-other) - sh/r.h - sk/r.k)
		rows = append(rows, ProductionRow{Capacity: r.c, Home: r.h, Catalog: r.k, Product: p})
	}
	x := fitRows(rows)
	for i, want := range []float64{sh, sk, other} {
		if math.Abs(x[i]-want) > 1e-9 {
			t.Fatalf("fit %v, want (%g, %g, %g)", x, sh, sk, other)
		}
	}
}

// TestProductionFit: production's four complete rows are one farm. Each row on its own puts
// the share of the slots that refreshed no scheduled page within a point of the common fit,
// and index order's rows read as one common lag give the product route's 48 h back.
func TestProductionFit(t *testing.T) {
	f := ProductionFit()
	t.Logf("home %.4f catalog %.4f product %.4f other %.4f rows %v spread %v lags %+v", f.Home, f.Catalog, f.Product, f.Other, f.RowOther, f.Spread, f.Lags)
	if len(f.Rows) != 4 || len(f.Lags) != 2 {
		t.Fatalf("fitted %d rows, %d index-order rows", len(f.Rows), len(f.Lags))
	}
	for i, o := range f.RowOther {
		if math.Abs(o-f.Other) > 0.01 {
			t.Errorf("%s at %g: other %.3f against the fit's %.3f", f.Rows[i].Policy, f.Rows[i].Capacity, o, f.Other)
		}
	}
	for k := range 3 {
		v := []float64{f.Home, f.Catalog, f.Other}[k]
		if lo, hi := f.Spread[k][0], f.Spread[k][1]; !(lo <= v && v <= hi && hi-lo < 0.02) {
			t.Errorf("parameter %d: %.4f outside or loosely within its spread [%.4f, %.4f]", k, v, lo, hi)
		}
	}
	for _, l := range f.Lags {
		if math.Abs(l.Product-48) > 1 {
			t.Errorf("index order at %g: lag %.2f h gives products a %.1f h cadence, not 48 h", l.Capacity, l.Lag, l.Product)
		}
	}
}

// TestDefaultMixFitsProduction: the default mix is what production's figures say, within the
// spread their rounding leaves — demand shares, the catalog's cadence, the farm's other work,
// and discovered pages that are all product pages. A change to the mix that leaves production
// behind fails here.
func TestDefaultMixFitsProduction(t *testing.T) {
	f := ProductionFit()
	c := generate(t, 200_000, 1)
	ds := demandShares(c)
	within := func(name string, v float64, k int) {
		if lo, hi := f.Spread[k][0], f.Spread[k][1]; v < lo || v > hi {
			t.Errorf("%s %.4f outside production's [%.4f, %.4f]", name, v, lo, hi)
		}
	}
	within("home's share of the demand", ds[0], 0)
	within("catalog's share of the demand", ds[1], 1)
	m := c.Mix.Render
	within("unscheduled + transient failures", m.Unscheduled+(1-m.Unscheduled)*m.Transient, 2)
	h := c.ClassHarmonicCadenceMs[1] / 3_600_000
	for _, l := range f.Lags {
		if math.Abs(h-l.Catalog) > 0.5 {
			t.Errorf("catalog renders at a harmonic %.1f h; production's index order at %g says %.1f h", h, l.Capacity, l.Catalog)
		}
	}
	for _, cl := range c.Mix.Classes {
		if cl.Name != "product" && cl.Discovered != 0 {
			t.Errorf("%s pages are %.0f %% discovered; production's discovered pages were product pages", cl.Name, 100*cl.Discovered)
		}
	}
}
