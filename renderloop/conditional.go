package renderloop

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// conditionalCheck is a render worker's cheaper check: before rendering a page whose row says
// its origin sent validators (claim.Job.Checkable), ask worker 0 whether it may be checked
// instead (wire.Validators: the validators, and whether its bounds allow a check), and if so
// ask the origin with a conditional GET; a 304 is the result, an ok with status 304 and no
// body, which worker 0 applies as "unchanged, verified now". With the http renderer the
// conditional GET is the render (a changed page is fetched once); with another, any answer but
// a 304, or a failure to ask, renders the page in full.
type conditionalCheck struct {
	client *wire.Client

	mu      sync.Mutex
	render  any             // the render settings checker was built from (Settings.Render); nil: not built yet
	checker *render.Checker // render.* in force (render.domains, the timeout, the user agents)
}

// checkerFor is the checker of the render settings in force, rebuilt when a reload changed
// render.*, as the renderer is (renderers.get): a domain a reload took out of render.domains is
// not checked either.
func (c *conditionalCheck) checkerFor(e *Deps) *render.Checker {
	rc := e.Settings().Render
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checker == nil || (c.render != rc && !reflect.DeepEqual(c.render, rc)) {
		c.checker = e.NewChecker(rc)
	}
	c.render = rc
	return c.checker
}

// validatorsTimeout bounds the question to worker 0 before a render.
const validatorsTimeout = 2 * time.Second

// renderJob renders j with rdr, asking worker 0 first, for a checkable job, whether the origin may
// be asked conditionally (c nil: never). A ConditionalRenderer (the http renderer) then renders
// with the validators: its one GET is the check, and a 304 or the changed page its result. Any
// other renderer is checked first (render.Checker) and renders in full unless the origin
// answered 304. It reports false as renderJob does, for a render cut short by ctx's end.
func (c *conditionalCheck) renderJob(ctx context.Context, e *Deps, rdr render.Renderer, j claim.Job) (wire.Result, bool) {
	v := c.ask(ctx, j)
	if v == nil {
		return renderJob(ctx, e, rdr, j, nil)
	}
	if _, ok := rdr.(render.ConditionalRenderer); ok {
		return renderJob(ctx, e, rdr, j, v)
	}
	start := time.Now()
	device, url, _ := cachekey.Split(j.Key)
	cr, err := c.checkerFor(e).NotModified(ctx, url, device, v.ETag, v.LastModified)
	if err != nil || !cr.NotModified {
		e.Log.Debug().Str("url", url).Int("status", cr.Status).AnErr("error", err).Msg("conditional check: render in full")
		return renderJob(ctx, e, rdr, j, nil)
	}
	// An attempt like any other, as the http renderer's 304 is (freshq_render_total).
	e.Worker.Add(shm.CounterRenderOutcome+shm.Counter(outcome.OK-1), 1)
	e.Worker.Observe(shm.CounterRenderSeconds, shm.RenderSecondsBuckets[:], time.Since(start).Seconds(), 1e6)
	return wire.Result{
		Key: j.Key, Outcome: outcome.OK.String(), Status: 304, Stage: render.StageHeaders,
		DurationMs: time.Since(start).Milliseconds(), Headers: cr.Headers,
		Lease: wire.Lease{Slot: j.Lease.Slot, State: j.Lease.State, KeyHash: j.Lease.KeyHash},
	}, true
}

// ask returns the validators j's page may be checked with, or nil when it is rendered in full
// without asking the origin conditionally: c is nil, the job is not checkable, or worker 0
// refused or did not answer.
func (c *conditionalCheck) ask(ctx context.Context, j claim.Job) *render.Validators {
	if c == nil || !j.Checkable {
		// The question costs worker 0 a request and a read of the target: asked before every
		// render, it halved what a node renders per second.
		return nil
	}
	vctx, cancel := context.WithTimeout(ctx, validatorsTimeout)
	v, err := c.client.Validators(vctx, j.Key)
	cancel()
	if err != nil || !v.Check {
		return nil
	}
	return &render.Validators{ETag: v.ETag, LastModified: v.LastModified}
}
