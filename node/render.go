package node

import (
	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/render/chrome"
	"github.com/freshq/freshq/renderloop"
)

// renderWorker is a render worker's services, in their start order: the render pool
// (renderloop.Service), whose delivery to worker 0 stops after its render loops.
func renderWorker(e *env) []startstop.Service {
	return []startstop.Service{renderloop.New(renderDeps(e))}
}

// renderDeps is the render loop's inputs: the render settings in force are the configuration's
// render.*, from which the renderer and the conditional checker are built.
func renderDeps(e *env) *renderloop.Deps {
	_, granted := e.deps.GrantLog(e.cur.Load().Config())
	return &renderloop.Deps{Index: e.index, Holder: e.holder, Socket: e.socketPath, Seg: e.seg, Worker: e.worker, Log: e.log, Now: e.now,
		Settings: func() renderloop.Settings {
			cfg := e.cur.Load().Config()
			return renderloop.Settings{Concurrency: cfg.Render.Concurrency, Renderer: cfg.Render.Renderer,
				ShutdownTimeout: cfg.Supervisor.ShutdownTimeout.D(), Render: &cfg.Render}
		},
		Claim:   e.claimSettings,
		Granted: granted,
		NewRenderer: func(r any, hooks chrome.Hooks) (render.Renderer, error) {
			c := *r.(*config.Render)
			if c.Renderer == "chrome" {
				return chrome.New(assemble.ChromeOptions(c), hooks)
			}
			return render.New(assemble.RenderOptions(c), render.WithStream(uint64(e.index)))
		},
		NewChecker: func(r any) *render.Checker { return render.NewChecker(assemble.RenderOptions(*r.(*config.Render))) },
	}
}
