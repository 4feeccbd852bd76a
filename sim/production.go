package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// ProductionRow is one row of what the system freshq replaces measured in production:
// the mean age at render ÷ TTL of each route class, at a capacity, under one of its policies.
// Discovery is the crawler-discovered pages, whatever their route; 0 means they starved.
type ProductionRow struct {
	Capacity                          float64
	Policy                            string
	Home, Catalog, Product, Discovery float64
}

// Production is that table, the only measurements of the production queue there are. The
// default mix is derived from it (ProductionFit) and the report compares against it.
var Production = []ProductionRow{
	{Capacity: 1, Policy: "index order", Home: 4.78, Catalog: 1.32, Product: 1.08, Discovery: 1.08},
	{Capacity: 1, Policy: "floors", Home: 1.00, Catalog: 1.00, Product: 1.13, Discovery: 1.13},
	{Capacity: 0.5, Policy: "index order", Home: 48.83, Catalog: 5.01, Product: 2.00, Discovery: 2.00},
	{Capacity: 0.5, Policy: "floors", Home: 4.95, Catalog: 1.33, Product: 2.49, Discovery: 2.49},
	{Capacity: 0.5, Policy: "strict", Home: 1.00, Catalog: 1.00, Product: 2.50, Discovery: 0},
}

// Fit is what production's rows say about the corpus and the farm they were measured on.
//
// A class whose pages are rendered at a mean age of r cadences is rendered 1/r as often as its
// cadences ask, so it takes s/r of the demand D, s being its share of D (its renders per hour
// at ratio 1 over everyone's). Every row therefore states one balance:
//
//	s_home/r_home + s_catalog/r_catalog + s_product/r_product = c·(1 − other)
//
// where c·D is the farm's capacity and other is the share of the farm's slots that refreshed no
// scheduled page (failed attempts, renders nobody's cadence asked for — or capacity the label
// overstates: the rows cannot tell these apart). The four rows that measure every class (the
// index-order and floors rows at both capacities) give four balances in three unknowns
// (s_home, s_catalog and other; s_product = 1 − the other two), solved by least squares. The
// strict row is left out: its discovered pages starved, so its balance holds pages nobody
// measured.
type Fit struct {
	Home, Catalog, Product float64 // shares of the cadence demand
	Other                  float64 // share of the farm's slots not spent on scheduled renders
	// Rows are the rows fitted, and RowOther, for each of them, the share of its slots it implies
	// went elsewhere given the fitted demand shares: (c − Σ s/r) / c. That these agree is what
	// says other is a share of the farm, the same at every capacity.
	Rows     []ProductionRow
	RowOther []float64
	// Lags reads each index-order row the way index order behaves: every class waits the same
	// absolute lag L past its due time, so r = 1 + L/T. The home route's exact 1 h gives L, and
	// L the cadence the catalog's and product's figures imply, T = L/(r − 1) — for a class on
	// the demand ladder, the harmonic mean of the cadences its renders set.
	Lags []IndexLag
	// Spread is the 5th and 95th percentile of Home, Catalog and Other when every figure of the
	// rows fitted is moved anywhere within its rounding (±0.005, a 1.00× only upwards): how
	// much the two decimals production gave leave open.
	Spread [3][2]float64
}

// IndexLag is what one index-order row of Production implies, in hours.
type IndexLag struct {
	Capacity              float64
	Lag, Catalog, Product float64
}

// ProductionFit fits Fit to Production. It is deterministic: the rounding spread is sampled
// with the simulator's own hash draws.
func ProductionFit() Fit {
	var rows []ProductionRow
	for _, r := range Production {
		if r.Home > 0 && r.Catalog > 0 && r.Product > 0 && r.Discovery > 0 {
			rows = append(rows, r)
		}
	}
	x := fitRows(rows)
	f := Fit{Home: x[0], Catalog: x[1], Product: 1 - x[0] - x[1], Other: x[2], Rows: rows}
	for _, r := range rows {
		f.RowOther = append(f.RowOther, balanceOther([3]float64{f.Home, f.Catalog, f.Product}, r))
	}
	for _, r := range rows {
		if r.Policy == "index order" {
			lag := r.Home - 1 // × the home route's 1 h
			f.Lags = append(f.Lags, IndexLag{Capacity: r.Capacity, Lag: lag, Catalog: lag / (r.Catalog - 1), Product: lag / (r.Product - 1)})
		}
	}
	const samples = 4000
	var drawn [3][]float64
	moved := make([]ProductionRow, len(rows))
	for n := range samples {
		for i, r := range rows {
			k := uint64(4 * i)
			move := func(v float64, j uint64) float64 {
				u := draw(0, streamFit, uint64(n), k+j)
				if v == 1 {
					return v + 0.005*u // a 1.00× is never below 1: a page is not rendered early
				}
				return v + 0.01*(u-0.5)
			}
			moved[i] = ProductionRow{Capacity: r.Capacity, Home: move(r.Home, 0), Catalog: move(r.Catalog, 1), Product: move(r.Product, 2)}
		}
		x := fitRows(moved)
		for k := range 3 {
			drawn[k] = append(drawn[k], x[k])
		}
	}
	for k := range 3 {
		slices.Sort(drawn[k])
		f.Spread[k] = [2]float64{percentile(drawn[k], 0.05), percentile(drawn[k], 0.95)}
	}
	return f
}

// fitRows solves the rows' balances for (s_home, s_catalog, other) by least squares.
func fitRows(rows []ProductionRow) [3]float64 {
	// In the unknowns x = (s_home, s_catalog, other), with s_product = 1 − s_home − s_catalog:
	//   s_home·(1/r_h − 1/r_p) + s_catalog·(1/r_c − 1/r_p) + c·other = c − 1/r_p.
	var ata [3][3]float64
	var atb [3]float64
	for _, r := range rows {
		a := [3]float64{1/r.Home - 1/r.Product, 1/r.Catalog - 1/r.Product, r.Capacity}
		b := r.Capacity - 1/r.Product
		for i := range 3 {
			for j := range 3 {
				ata[i][j] += a[i] * a[j]
			}
			atb[i] += a[i] * b
		}
	}
	return solve3(ata, atb)
}

// solve3 solves a 3×3 linear system by Gaussian elimination with partial pivoting.
func solve3(a [3][3]float64, b [3]float64) [3]float64 {
	for i := range 3 {
		p := i
		for j := i + 1; j < 3; j++ {
			if math.Abs(a[j][i]) > math.Abs(a[p][i]) {
				p = j
			}
		}
		a[i], a[p] = a[p], a[i]
		b[i], b[p] = b[p], b[i]
		for j := i + 1; j < 3; j++ {
			f := a[j][i] / a[i][i]
			for k := i; k < 3; k++ {
				a[j][k] -= f * a[i][k]
			}
			b[j] -= f * b[i]
		}
	}
	var x [3]float64
	for i := 2; i >= 0; i-- {
		s := b[i]
		for k := i + 1; k < 3; k++ {
			s -= a[i][k] * x[k]
		}
		x[i] = s / a[i][i]
	}
	return x
}

// productionTable renders Production as the issue gave it.
func productionTable() string {
	var b strings.Builder
	b.WriteString("| capacity | policy | home (1 h) | catalog (6–12 h) | product (48 h) | discovery |\n|---|---|---|---|---|---|\n")
	for _, r := range Production {
		disc := "STARVED"
		if r.Discovery > 0 {
			disc = fmt.Sprintf("%.2f×", r.Discovery)
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f× | %.2f× | %.2f× | %s |\n", pct(r.Capacity), r.Policy, r.Home, r.Catalog, r.Product, disc)
	}
	return b.String()
}

// balanceOther is the share of a row's slots that refreshed no scheduled page, if the demand
// were split between home, catalog and product as shares says.
func balanceOther(shares [3]float64, r ProductionRow) float64 {
	return (r.Capacity - shares[0]/r.Home - shares[1]/r.Catalog - shares[2]/r.Product) / r.Capacity
}

// demandShares is each route class's share of the corpus's demand.
func demandShares(c *Corpus) []float64 {
	out := make([]float64, len(c.ClassDemand))
	for k, d := range c.ClassDemand {
		out[k] = d / c.DemandPerHour
	}
	return out
}
