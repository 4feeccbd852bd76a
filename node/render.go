package node

import (
	"sync"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/render/chrome"
	"github.com/freshq/freshq/render/chrome/nice"
	"github.com/freshq/freshq/renderloop"
)

// renderWorker is a render worker's services, in their start order: the render pool
// (renderloop.Service), whose delivery to worker 0 stops after its render loops.
func renderWorker(e *env) []startstop.Service {
	return []startstop.Service{renderloop.New(renderDeps(e))}
}

// renderDeps is the render loop's inputs: the render settings in force are the configuration's
// render.*, from which the renderer and the conditional checker are built.
//
// render.concurrency is resolved once, from the configuration at start and this process's cores
// (assemble.RenderConcurrency): it sizes the render loops and the chrome renderer's tabs, which
// a reload does not change, so every renderer built later gets the same figure.
func renderDeps(e *env) *renderloop.Deps {
	start := e.cur.Load().Config()
	_, granted := e.deps.GrantLog(start)
	concurrency := assemble.RenderConcurrency(start)
	e.log.Info().Int("render_concurrency", concurrency).Bool("derived", start.Render.Concurrency == 0).
		Int("cores", assemble.Cores()).Int("render_workers", start.Workers-1).Str("renderer", start.Render.Renderer).
		Msg("render concurrency")
	var niceMissing sync.Once // one warning a worker, whichever renderer (a reload's) first finds no nice
	return &renderloop.Deps{Index: e.index, Holder: e.holder, Socket: e.socketPath, Seg: e.seg, Worker: e.worker, Log: e.log, Now: e.now,
		Settings: func() renderloop.Settings {
			cfg := e.cur.Load().Config()
			return renderloop.Settings{Concurrency: concurrency, Renderer: cfg.Render.Renderer,
				ShutdownTimeout: cfg.Supervisor.ShutdownTimeout.D(), Render: &cfg.Render}
		},
		Claim:   e.claimSettings,
		Granted: granted,
		NewRenderer: func(r any, hooks chrome.Hooks) (render.Renderer, error) {
			c := *r.(*config.Render)
			c.Concurrency = concurrency // the chrome renderer's tabs, the http renderer's connections a host
			if c.Renderer == "chrome" {
				warnNoNice(e.log, &niceMissing, c.Chrome.Nice)
				return chrome.New(assemble.ChromeOptions(c), hooks)
			}
			return render.New(assemble.RenderOptions(c), render.WithStream(uint64(e.index)))
		},
		NewChecker: func(r any) *render.Checker { return render.NewChecker(assemble.RenderOptions(*r.(*config.Render))) },
	}
}

// warnNoNice logs once (once) that the browsers run at the worker's priority although
// render.chrome.nice asks for a lower one: the worker's PATH has no nice program, so the chrome
// renderer starts them as they are (package render/chrome/nice) rather than fail.
func warnNoNice(log zerolog.Logger, once *sync.Once, niceness int) {
	if niceness <= 0 {
		return
	}
	if _, err := nice.Find(); err != nil {
		once.Do(func() {
			log.Warn().Err(err).Int("render_chrome_nice", niceness).
				Msg("chrome renderer: no nice program; the browsers run at the worker's priority")
		})
	}
}
