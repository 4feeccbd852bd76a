package capacity

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// The demand the capacity view gives (freshqctl top) and a plan's current demand (freshqctl
// plan) are the same figure for one store and one configuration: after a reload too, once the
// service was told of it (Reloaded), without waiting for the periodic recount.
func TestViewAndPlanAgreeAfterAReload(t *testing.T) {
	policyOf := func(interval string) *policy.Policy {
		cfg, err := config.Parse([]byte("routes:\n  - {name: catalog, match: prefix, path: /c/, interval: " + interval + "}\n"))
		if err != nil {
			t.Fatal(err)
		}
		pol, err := assemble.Policy(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return pol
	}
	var pol atomic.Pointer[policy.Policy]
	pol.Store(policyOf("6h"))
	raw := openStore(t)
	now := int64(1_700_000_000_000)
	s := NewService(raw, pol.Load, func() int64 { return now }, func() uint64 { return 0 }, zerolog.Nop())
	s.Every = time.Hour // no periodic recount within the test
	cst := WrapStore(raw, s.Ledger, s.Meter)
	for _, k := range []string{"desktop|https://a.test/c/1", "desktop|https://a.test/c/2", "mobile|https://a.test/c/1"} {
		sch, _ := store.NewSchedule([]byte(k), now, true, 0, store.Lanes{})
		if err := cst.WriteSchedule(sch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	agree := func(want float64) bool {
		p, err := s.Plan(pol.Load())
		if err != nil {
			t.Fatal(err)
		}
		v := s.View()
		return math.Abs(v.Demand.Total-want) < 1e-12 && math.Abs(p.Current.Demand-want) < 1e-12
	}
	wait := func(what string, want float64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !agree(want) {
			if time.Now().After(deadline) {
				p, _ := s.Plan(pol.Load())
				t.Fatalf("%s: view %v, plan %v, want both %v", what, s.View().Demand.Total, p.Current.Demand, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("at 6h", 3/(6*3600.0))
	for deadline := time.Now().Add(10 * time.Second); s.View().RecountedAtMs == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no recount at start")
		}
	}
	pol.Store(policyOf("3m"))
	s.Reloaded()
	wait("after the reload to 3m", 3/180.0)
}
