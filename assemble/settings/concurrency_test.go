package settings

import (
	"testing"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
)

// A node whose chrome render.concurrency is derived plans its sweeps for the renders its render
// workers run: render workers × the derived figure of this process's cores, the same figure
// the render loops start with (assemble.RenderConcurrency), never the unset 0.
func TestSweepRenderSlotsFollowTheDerivedConcurrency(t *testing.T) {
	cfg, err := config.Parse([]byte("workers: 3\nrender:\n  renderer: chrome\n"))
	if err != nil {
		t.Fatal(err)
	}
	per := assemble.RenderConcurrency(cfg)
	if per != cfg.RenderConcurrency(assemble.Cores()) || per < config.ConcurrencyDerivedMin {
		t.Fatalf("assemble.RenderConcurrency %d on %d cores, want config's derivation, at least %d", per, assemble.Cores(), config.ConcurrencyDerivedMin)
	}
	if got := SweepSettings(cfg).RenderSlots; got != 2*per {
		t.Errorf("RenderSlots %d, want 2 render workers × %d", got, per)
	}
}
