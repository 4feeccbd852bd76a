package renderloop

import (
	"io"
	"reflect"
	"slices"
	"sync"

	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/render/chrome"
	"github.com/freshq/freshq/shm"
)

// renderers is the renderer of the configuration in force: a reload that changes render.*
// (all but concurrency, which needs a restart) takes effect from the next render on. A reload
// that leaves render.* as it was keeps the renderer, and its warm connections.
type renderers struct {
	e     *Deps
	build func(settings any) (render.Renderer, error)
	mu    sync.Mutex
	cur   any // the render settings rdr was built from (Settings.Render)
	rdr   render.Renderer
}

// newRenderers builds the renderer of the configuration in force (Deps.NewRenderer).
func newRenderers(e *Deps) (*renderers, error) {
	hooks := chromeHooks(e)
	r := &renderers{e: e, build: func(settings any) (render.Renderer, error) { return e.NewRenderer(settings, hooks) }}
	r.cur = e.Settings().Render
	rdr, err := r.build(r.cur)
	if err != nil {
		return nil, err
	}
	r.rdr = rdr
	return r, nil
}

// close closes the renderer in force if it holds a process (the chrome renderer's browser): the
// render worker's last act, after its renders ended.
func (r *renderers) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.rdr.(io.Closer); ok {
		if err := c.Close(); err != nil {
			r.e.Log.Warn().Err(err).Msg("closing the renderer")
		}
	}
}

// chromeHooks counts what the chrome renderer blocks and restarts in this worker's counters.
func chromeHooks(e *Deps) chrome.Hooks {
	index := func(names []string, name string) int { return slices.Index(names, name) }
	return chrome.Hooks{
		Blocked: func(reason string) {
			if i := index(shm.ChromeBlockReasons[:], reason); i >= 0 {
				e.Worker.Add(shm.CounterChromeBlocked+shm.Counter(i), 1)
			}
		},
		Restarted: func(reason string) {
			if i := index(shm.ChromeRestartReasons[:], reason); i >= 0 {
				e.Worker.Add(shm.CounterChromeRestarts+shm.Counter(i), 1)
			}
			e.Log.Info().Str("reason", reason).Msg("chrome renderer: browser retired; a new one starts for the next render")
		},
	}
}

// idleCloser is a renderer that keeps connections (render.HTTP).
type idleCloser interface{ CloseIdleConnections() }

// get returns the renderer, rebuilt if a reload changed render.*. The renderer it replaces
// closes its idle connections (renders still running on it finish on theirs). A reload whose
// renderer cannot be built keeps the previous one, and says so once.
func (r *renderers) get() render.Renderer {
	cur := r.e.Settings().Render
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur == r.cur {
		return r.rdr
	}
	changed := !reflect.DeepEqual(cur, r.cur)
	r.cur = cur
	if !changed {
		return r.rdr
	}
	rdr, err := r.build(cur)
	if err != nil {
		r.e.Log.Error().Err(err).Msg("the reloaded configuration's renderer; keeping the previous one")
		return r.rdr
	}
	if c, ok := r.rdr.(idleCloser); ok {
		c.CloseIdleConnections()
	}
	if c, ok := r.rdr.(io.Closer); ok {
		go c.Close() // a browser: it closes once the renders still running on it end
	}
	r.rdr = rdr
	return r.rdr
}
