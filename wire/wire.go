// Package wire is what travels between freshq's processes and its clients: the JSON shapes of
// worker 0's endpoints (internal and public), the binary results batch render workers send, the
// error body every refusal carries, the internal paths and request limits, the decoder of a
// targets upload, and the client of worker 0's control socket.
//
// It imports nothing else of freshq (River's rivertype is the model), so a client such as
// freshqctl links no store, no shared memory and no renderer: `go list -deps ./cmd/freshqctl`
// holds neither Badger nor another freshq package. The server side converts between these
// shapes and its own types (package api); nothing here decides anything about a row.
//
// Invariants:
//   - A shape's JSON field names are the API's (docs/API.md, docs/ARCHITECTURE.md): renaming a
//     field is a change of the API, not a refactoring.
//   - Every decoder here bounds what it allocates before it allocates it: DecodeResults by
//     MaxResults and MaxResultHeaders, DecodeTargetItems by MaxTargetItem per item. Bad input
//     is an error naming the field (FieldError), never a panic.
//   - A refusal's body is always ErrorBody: {"error": "...", "field": "..."}.
package wire

import (
	"encoding/json"
	"net/http"
)

// Internal endpoint paths, served on worker 0's control socket only.
const (
	PathClaim   = "/internal/claim"
	PathResults = "/internal/results"
	PathStatus  = "/internal/status"
	// PathValidators is a render worker's question before a render: may it check the page
	// with a conditional GET, and with which validators (Validators).
	PathValidators = "/internal/validators"
	// PathServeMetrics is worker 0's crawler-listener series (package serve), in the Prometheus
	// text format; the supervisor's /metrics gathers them with its own.
	PathServeMetrics = "/internal/serve/metrics"
)

// MaxResultsBody is the largest results request body worker 0 accepts, JSON or binary, on
// POST /internal/results and POST /v1/results; a larger one is answered 413 before it is read
// past the limit. It is sized so that one result carrying the largest page the store keeps
// (store.MaxPageBody, 32 MiB) fits in JSON, where the body is base64 (4/3: 42.7 MiB), with
// 5 MiB to spare for the key, headers and the rest. A render worker cuts its batches by bytes
// well below it. Worker 0 holds a request's body while it applies it, so this is also the
// memory one results request may pin.
const MaxResultsBody = 48 << 20

// MaxOperateBody bounds the body of an operator's small request (prioritize, delete, recache):
// the API refuses a larger one, and the admin listener reads a recache's body up to it to find
// the token the hosted service's tools put there.
const MaxOperateBody = 1 << 20

// MaxResults bounds the results of one request (a render worker sends at most a few hundred).
// JSON can describe a result in 3 bytes that decode into some 200: without a count bound a
// body within MaxResultsBody could cost gigabytes.
const MaxResults = 10_000

// MaxResultHeaders bounds the headers of one result. A renderer sends the few that serving a
// page needs (render keeps six, the store five), but JSON can name a header in 6 bytes that
// decode into a map entry of some 100: without a bound one result within MaxResultsBody could
// decode into millions of entries. Both decoders refuse more, naming results[i].headers.
const MaxResultHeaders = 64

// Result is one render attempt's outcome as it travels to worker 0.
type Result struct {
	Key        []byte            `json:"key"`
	Outcome    string            `json:"outcome"` // an outcome.Outcome name
	Status     int               `json:"status,omitempty"`
	Stage      string            `json:"stage,omitempty"`
	DurationMs int64             `json:"duration_ms"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       []byte            `json:"body,omitempty"`
	Err        string            `json:"err,omitempty"`
	Lease      Lease             `json:"lease"`
	// Signals is what a browser renderer saw of the page (render.Signals); absent from
	// renderers that run no scripts.
	Signals *Signals `json:"signals,omitempty"`
}

// Signals is render.Signals on the wire. Validate bounds Evidence (render.MaxEvidence lines
// of render.MaxEvidenceLen bytes) and refuses negative counts, naming results[i].signals.
type Signals struct {
	Exceptions      int      `json:"exceptions,omitempty"`
	FailedRequests  int      `json:"failed_requests,omitempty"`
	PendingRequests int      `json:"pending_requests,omitempty"`
	Cold            bool     `json:"cold,omitempty"`
	Evidence        []string `json:"evidence,omitempty"`
}

// Lease is a lease of the shared lease table (shm.Lease) on the wire.
type Lease struct {
	Slot    uint32 `json:"slot"`
	State   uint64 `json:"state"`
	KeyHash uint64 `json:"key_hash"`
}

// Job is a granted job (claim.Job) on the wire.
type Job struct {
	Key       []byte  `json:"key"`
	KeyHash   uint64  `json:"key_hash"`
	DueAtMs   int64   `json:"due_ms"`
	CadenceMs int64   `json:"cadence_ms"`
	Submitted bool    `json:"from_sitemap"` // the site owner submitted the page (sitemap or API); the JSON name predates the field's, and remote renderers read it
	Lane      uint8   `json:"lane"`
	Score     float64 `json:"score"`
	Source    string  `json:"source"` // claim.Source.String(): "ready" or "index"
	Lease     Lease   `json:"lease"`
	// Checkable is the row's hint that its origin sent validators (claim.Job.Checkable): a
	// render worker asks PathValidators before rendering only a checkable job.
	Checkable bool `json:"checkable,omitempty"`
	// HostToken is the job's slot of its host (claim.Job.HostToken), on the internal claim
	// only: a render worker gives it back when its render ends. A remote renderer's job carries
	// none; worker 0 gives its slot back when the result or release arrives.
	HostToken *Lease `json:"host_token,omitempty"`
}

// ClaimRequest is the body of POST /internal/claim: a render worker asks for up to N jobs from
// the floored index scan.
type ClaimRequest struct {
	N      int    `json:"n"`
	Holder uint64 `json:"holder"`
	TTLMs  int64  `json:"ttl_ms,omitempty"` // the lease TTL asked for; 0: queue.lease_ttl
}

// ClaimResponse answers POST /internal/claim.
type ClaimResponse struct {
	Jobs []Job `json:"jobs"`
	// QueuedBehindLeases: no job, because the bounded scan read only leased rows and more are
	// due behind them (claim.ErrQueuedBehindLeases). Not "nothing to do".
	QueuedBehindLeases bool `json:"queued_behind_leases,omitempty"`
}

// ResultsRequest is the JSON body of POST /internal/results and POST /v1/results.
type ResultsRequest struct {
	Results []Result `json:"results"`
}

// ApplyStats is what a results batch did; every result is counted in exactly one of Applied,
// Skipped and Fenced.
type ApplyStats struct {
	Applied int `json:"applied"`
	Skipped int `json:"skipped"` // the row was deleted while it rendered
	// Fenced results changed nothing: their lease was not held (FencedItems says why, by index).
	Fenced      int         `json:"fenced"`
	FencedItems []ItemError `json:"fenced_items,omitempty"` // the first few
	// HostRefused results were the host refusing the render (a 429, or a 503 with
	// Retry-After): not a failure of the page, so their rows were left as they were, due.
	HostRefused int `json:"host_refused,omitempty"`
}

// ItemError names the field of one rejected item of a request, by its index.
type ItemError struct {
	Index int    `json:"index"`
	Field string `json:"field"`
	Error string `json:"error"`
}

// Status is worker 0's readiness, for the supervisor.
type Status struct {
	Serving    bool   `json:"serving"`
	Sweeps     uint64 `json:"sweeps"`      // finished sweeps since this worker 0 started
	SweepFails uint64 `json:"sweep_fails"` // failed sweeps since this worker 0 started
}

// ErrorBody is the JSON body of every 4xx and 5xx.
type ErrorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// FencedBody is the 409 body of a results batch whose every result was fenced: the error every
// client understands, and the counts.
type FencedBody struct {
	ErrorBody
	ApplyStats
}

// WriteJSON answers code with v as JSON.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// WriteError answers an API error: status code and the JSON body {"error": msg, "field": field}
// (field omitted when empty). Worker 0 and the supervisor's public guards both answer with it,
// so that every refusal a client meets has the same shape.
func WriteError(w http.ResponseWriter, code int, field, msg string) {
	WriteJSON(w, code, ErrorBody{Error: msg, Field: field})
}

// ValidatorsRequest asks worker 0 for the validators of a page about to be rendered.
type ValidatorsRequest struct {
	Key []byte `json:"key"`
}

// Validators is worker 0's answer: Check says whether the render worker may first ask the
// origin with a conditional GET (the origin sent validators, and the page was rendered in full
// recently enough: freshness.conditional_every, freshness.conditional_max_age); a 304 is then
// reported as an ok result with status 304 and no body.
type Validators struct {
	Check        bool   `json:"check"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
}
