package capacity

import (
	"github.com/freshq/freshq/assemble"
	"strings"
	"testing"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// TestPlanRouteChange: the catalog route's interval goes from 24 h to 6 h; its rows' demand is
// four times what it was, the other routes' unchanged, nothing is written, and the line says
// so. A row on the ladder takes the proposed ladder's rung.
func TestPlanRouteChange(t *testing.T) {
	cur := testPolicy(t)
	nextCfg, err := config.Parse([]byte(`
render:
  demand: {ladder: [3h, 6h, 12h, 24h]}
routes:
  - {name: home, match: exact, path: /, interval: 1h}
  - {name: catalog, match: prefix, path: /c/, interval: 6h}
  - {name: product, match: prefix, path: /p/, interval: 48h}
`))
	if err != nil {
		t.Fatal(err)
	}
	next, err := assemble.Policy(nextCfg)
	if err != nil {
		t.Fatal(err)
	}
	raw := openStore(t)
	now := int64(1_700_000_000_000)
	put := func(key string, effMs int64, tgt *store.Target) {
		sch, err := store.NewSchedule([]byte(key), now, true, effMs, store.Lanes{})
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.WriteSchedules([]store.Write{{Schedule: sch, Target: tgt}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		put("desktop|https://example.test/c/"+string(rune('a'+i)), 0, nil)
	}
	put("desktop|https://example.test/", 0, nil)
	// A product page on the ladder's 48 h rung (rung 4): under the proposal, rung 4 is 24 h.
	put("desktop|https://example.test/p/1", 48*hourMs, &store.Target{URL: "u", Source: store.SourceSitemap, DemandRung: 4})

	p, err := Plan(raw, cur, next, Capacity{PerSecond: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Current.Rows != 12 || p.Proposed.Rows != 12 {
		t.Fatalf("rows %d → %d, want 12", p.Current.Rows, p.Proposed.Rows)
	}
	if got, want := p.Proposed.DemandByRoute["catalog"], 4*p.Current.DemandByRoute["catalog"]; !near(got, want) {
		t.Fatalf("catalog demand %v, want %v", got, want)
	}
	if got, want := p.Proposed.DemandByRoute["product"], 2*p.Current.DemandByRoute["product"]; !near(got, want) {
		t.Fatalf("product on the ladder: %v, want twice %v", got, p.Current.DemandByRoute["product"])
	}
	if p.Proposed.DemandByRoute["home"] != p.Current.DemandByRoute["home"] {
		t.Fatal("home's demand changed")
	}
	text := strings.Join(p.Lines, "\n")
	for _, want := range []string{"routes: /c/ 24h → 6h: demand +300 %, projected catalog lateness 1.0× → 1.0×",
		"render.demand.ladder: 6h/12h/24h/48h → 3h/6h/12h/24h", "total: demand"} {
		if !strings.Contains(text, want) {
			t.Errorf("lines lack %q:\n%s", want, text)
		}
	}
	// Read-only: the store's rows are as they were.
	fresh := NewLedger(func() *policy.Policy { return cur })
	if d, _ := fresh.Recount(raw, nopLog); !near(fresh.Demand().Total, p.Current.Demand) || d.Rows != 12 {
		t.Fatalf("after the plan: %v, want %v", fresh.Demand().Total, p.Current.Demand)
	}
}

func near(a, b float64) bool { return a-b < 1e-12*b+1e-15 && b-a < 1e-12*b+1e-15 }
