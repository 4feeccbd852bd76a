package renderloop

import (
	"context"
	"unicode/utf8"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// renderJob renders one job, conditionally when v is set (render.Request.Validators). It
// reports false, and counts nothing, if the render was cut short by ctx's end (the drain bound): it did not finish, and its lease must be given back. A render
// that finished as ctx ended is kept: what counts is its outcome (a cut render is
// outcome.Timeout), not whether ctx has ended since.
func renderJob(ctx context.Context, e *Deps, rdr render.Renderer, j claim.Job, v *render.Validators) (wire.Result, bool) {
	device, url, _ := cachekey.Split(j.Key)
	// The cache epoch an operator's rush or recache raised (worker 0's block): a chrome
	// renderer clears its browser's cache once when it sees a new one.
	res := rdr.Render(ctx, render.Request{Key: j.Key, URL: url, Device: device, CacheEpoch: e.Seg.CacheEpoch(), Validators: v})
	if tm := res.Timings; tm != nil {
		e.Log.Debug().Str("url", url).Str("device", device).Str("outcome", res.Outcome.String()).Dur("response", tm.Response).
			Dur("load", tm.Load).Dur("ready", tm.Ready).Dur("captured", tm.Captured).Int("blocked", tm.Blocked).Msg("chrome render")
	}
	if res.Outcome == outcome.Timeout && ctx.Err() != nil {
		return wire.Result{}, false
	}
	if i := int(res.Outcome) - 1; i >= 0 && i < shm.NumRenderOutcomes {
		e.Worker.Add(shm.CounterRenderOutcome+shm.Counter(i), 1)
	}
	e.Worker.Observe(shm.CounterRenderSeconds, shm.RenderSecondsBuckets[:], res.Duration.Seconds(), 1e6)
	return wire.Result{
		Key: j.Key, Outcome: res.Outcome.String(), Status: res.Status, Stage: res.Stage,
		DurationMs: res.Duration.Milliseconds(), Headers: res.Headers, Body: res.Body, Err: res.Err,
		Lease:   wire.Lease{Slot: j.Lease.Slot, State: j.Lease.State, KeyHash: j.Lease.KeyHash},
		Signals: wireSignals(res.Signals),
	}, true
}

// wireSignals is a render's signals for worker 0, trimmed to the bounds wire.Validate holds
// them to (render.MaxEvidence lines of render.MaxEvidenceLen bytes), so that a renderer's
// overlong evidence never costs the result its delivery; nil for a renderer that gives none.
func wireSignals(s *render.Signals) *wire.Signals {
	if s == nil {
		return nil
	}
	out := &wire.Signals{Exceptions: max(s.Exceptions, 0), FailedRequests: max(s.FailedRequests, 0),
		PendingRequests: max(s.PendingRequests, 0), Cold: s.Cold}
	for _, line := range s.Evidence[:min(len(s.Evidence), render.MaxEvidence)] {
		if len(line) > render.MaxEvidenceLen {
			n := render.MaxEvidenceLen
			for n > 0 && !utf8.RuneStart(line[n]) {
				n--
			}
			line = line[:n]
		}
		out.Evidence = append(out.Evidence, line)
	}
	return out
}
