package renderloop

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/render"
)

// closingRenderer is a renderer with connections: it counts CloseIdleConnections.
type closingRenderer struct {
	instantRenderer
	closed atomic.Int64
}

func (c *closingRenderer) CloseIdleConnections() { c.closed.Add(1) }

// A reload that leaves render.* as it was keeps the renderer and its warm connections; one that
// changes it builds a new renderer, and the old one closes its idle connections.
func TestRenderersRebuildOnlyWhenRenderChanges(t *testing.T) {
	e := poolEnv(t, 1)
	var built []*closingRenderer
	r := &renderers{e: e, cur: e.Settings().Render, build: func(any) (render.Renderer, error) {
		c := &closingRenderer{}
		built = append(built, c)
		return c, nil
	}}
	r.rdr, _ = r.build(r.cur)
	reload := func(change func(*config.Config)) {
		cfg := *currentConfig(e)
		change(&cfg)
		if err := setConfig(e, &cfg); err != nil {
			t.Fatal(err)
		}
	}

	reload(func(c *config.Config) { c.Queue.Ready.SweepInterval = config.Duration(5 * time.Second) })
	if got := r.get(); got != render.Renderer(built[0]) || len(built) != 1 {
		t.Fatalf("a reload that left render.* alone built %d renderers", len(built))
	}
	reload(func(c *config.Config) { c.Render.Timeout = config.Duration(30 * time.Second) })
	if got := r.get(); len(built) != 2 || got != render.Renderer(built[1]) {
		t.Fatalf("a reload that changed render.timeout: %d renderers built, the new one not in use", len(built))
	}
	if built[0].closed.Load() != 1 || built[1].closed.Load() != 0 {
		t.Fatalf("idle connections closed: old %d, new %d; want 1, 0", built[0].closed.Load(), built[1].closed.Load())
	}
	if r.get() != render.Renderer(built[1]) || len(built) != 2 {
		t.Fatal("the renderer was rebuilt without a reload")
	}
}
