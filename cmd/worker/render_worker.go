package main

import (
	"context"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/render/chrome"
	"github.com/freshq/freshq/renderloop"
)

// runRenderWorker is workers 1..N-1: the render loop (package renderloop) on this process's
// segment and configuration.
func runRenderWorker(ctx context.Context, e *env) error {
	return renderloop.Run(ctx, renderDeps(e))
}

// renderDeps is the render loop's inputs: the render settings in force are the configuration's
// render.*, from which the binary builds the renderer and the conditional checker.
func renderDeps(e *env) *renderloop.Deps {
	return &renderloop.Deps{Index: e.index, Holder: e.holder(), Socket: e.socketPath, Seg: e.seg, Worker: e.worker, Log: e.log, Now: nowMs,
		Settings: func() renderloop.Settings {
			cfg := e.cur.Load().Config()
			return renderloop.Settings{Concurrency: cfg.Render.Concurrency, Renderer: cfg.Render.Renderer,
				ShutdownTimeout: cfg.Supervisor.ShutdownTimeout.D(), Render: &cfg.Render}
		},
		Claim:   e.claimSettings,
		Granted: grantHook(openGrantLog(e, e.cur.Load().Config())),
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
