package api

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/freshq/freshq/wire"
)

// PlanFunc computes the what-if of a proposed configuration file over the current rows,
// read-only (capacity.Service.Plan), within ctx. A file that does not load is a
// *wire.FieldError naming the first configuration key it fails on ("body" when it is not
// YAML), its message with the line. Where the node is assembled it is built over the
// configuration's own loading, so this package reads no configuration.
type PlanFunc func(ctx context.Context, file []byte) (wire.Plan, error)

// Plan serves POST /v1/plan: the body is a configuration file (YAML, at most wire.MaxPlanBody
// bytes), decoded and validated as freshq-supervisor would load it; the answer is the demand
// it implies next to the current one. A file that does not load is a 400 naming the first
// field it fails on (its message has the line). A plan reads every row, so one runs at a time,
// its parse included: another meanwhile is refused with 503 and Retry-After before its body is
// parsed. The parse is bounded by the body's size (an alias bomb is a 400 naming the alias's
// line) and ends with the request.
type Plan struct {
	Compute PlanFunc
	running sync.Mutex
}

// Register adds the endpoint to mux.
func (p *Plan) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST "+wire.PathPlan, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wire.MaxPlanBody))
		if err != nil {
			fail(w, bodyError(err))
			return
		}
		if len(body) == 0 {
			fail(w, &wire.FieldError{Field: "body", Err: errEmptyBody})
			return
		}
		if !p.running.TryLock() {
			fail(w, ErrBusy)
			return
		}
		defer p.running.Unlock()
		plan, err := p.Compute(r.Context(), body)
		if err != nil {
			fail(w, err)
			return
		}
		ok(w, plan)
	})
}
