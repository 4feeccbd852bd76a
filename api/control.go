// Package api is worker 0's HTTP surface, served on its unix control socket: the internal
// endpoints render workers use (the index-claim fallback and result batches) and, behind the
// supervisor's public listener, the operator API. It also holds the client side the render
// workers use.
//
// Worker 0 is the only process with a store, so everything that reads or writes Badger on
// behalf of another process comes through here. Bad input is answered 4xx with a JSON error
// naming the field; nothing is half-written.
//
// Every writer of worker 0 (results, upserts, rush and wait, deletes) holds its keys' locks
// (KeyLocks) from its first read to its commit, and writes through sweep.Changes. A result is
// applied only while its lease is held, at most once per grant (Applier); a delete, rush or
// wait revokes the lease of a render in flight, so that render's result cannot undo it.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/policy"
)

// Internal endpoint paths.
const (
	PathClaim   = "/internal/claim"
	PathResults = "/internal/results"
	PathStatus  = "/internal/status"
)

// maxClaimBody bounds an internal claim request: a few numbers of JSON.
const maxClaimBody = 1 << 10

// MaxResultsBody is the largest results request body worker 0 accepts, JSON or binary, on
// POST /internal/results and POST /v1/results; a larger one is answered 413 before it is read
// past the limit. It is sized so that one result carrying the largest page the store keeps
// (store.MaxPageBody, 32 MiB) fits in JSON, where the body is base64 (4/3: 42.7 MiB), with
// 5 MiB to spare for the key, headers and the rest. A render worker cuts its batches by bytes
// well below it. Worker 0 holds a request's body while it applies it, so this is also the
// memory one results request may pin.
const MaxResultsBody = 48 << 20

// Job is a claim.Job on the wire.
type Job struct {
	Key         []byte  `json:"key"`
	KeyHash     uint64  `json:"key_hash"`
	DueAtMs     int64   `json:"due_ms"`
	CadenceMs   int64   `json:"cadence_ms"`
	FromSitemap bool    `json:"from_sitemap"`
	Lane        uint8   `json:"lane"`
	Score       float64 `json:"score"`
	Source      string  `json:"source"`
	Lease       Lease   `json:"lease"`
}

// WireJob converts a granted job for the wire.
func WireJob(j claim.Job) Job {
	return Job{Key: j.Key, KeyHash: j.KeyHash, DueAtMs: j.DueAtMs, CadenceMs: j.CadenceMs, FromSitemap: j.FromSitemap,
		Lane: uint8(j.Lane), Score: j.Score, Source: j.Source.String(), Lease: wireLease(j.Lease)}
}

// ClaimJob converts a wire job back.
func (j Job) ClaimJob() claim.Job {
	src := claim.SourceIndex
	if j.Source == claim.SourceReady.String() {
		src = claim.SourceReady
	}
	return claim.Job{Key: j.Key, KeyHash: j.KeyHash, DueAtMs: j.DueAtMs, CadenceMs: j.CadenceMs, FromSitemap: j.FromSitemap,
		Lane: policy.Lane(j.Lane), Score: j.Score, Source: src, Lease: j.Lease.shm()}
}

type claimRequest struct {
	N      int    `json:"n"`
	Holder uint64 `json:"holder"`
	TTLMs  int64  `json:"ttl_ms,omitempty"` // the lease TTL asked for; 0: queue.lease_ttl
}

type claimResponse struct {
	Jobs []Job `json:"jobs"`
	// QueuedBehindLeases: no job, because the bounded scan read only leased rows and more are
	// due behind them (claim.ErrQueuedBehindLeases). Not "nothing to do".
	QueuedBehindLeases bool `json:"queued_behind_leases,omitempty"`
}

type resultsRequest struct {
	Results []Result `json:"results"`
}

// Status is worker 0's readiness, for the supervisor.
type Status struct {
	Serving    bool   `json:"serving"`
	Sweeps     uint64 `json:"sweeps"`      // finished sweeps since this worker 0 started
	SweepFails uint64 `json:"sweep_fails"` // failed sweeps since this worker 0 started
}

// Control serves the internal endpoints.
type Control struct {
	Index   claim.Fallback
	Applier *Applier
	Status  func() Status
	Log     zerolog.Logger
}

// Register adds the internal endpoints to mux.
func (c *Control) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST "+PathClaim, c.claim)
	mux.HandleFunc("POST "+PathResults, resultsHandler(c.Applier, true))
	mux.HandleFunc("GET "+PathStatus, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, c.Status()) })
	// Profiles of worker 0, on its 0600 socket only (the public listener refuses /internal/):
	// curl --unix-socket <runtime dir>/freshq-<hash>.sock http://w0/internal/debug/pprof/profile?seconds=10
	// (README, Operating: Files)
	mux.HandleFunc("/internal/debug/pprof/", func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/internal")
		pprof.Index(w, r)
	})
	mux.HandleFunc("/internal/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/internal/debug/pprof/trace", pprof.Trace)
}

func (c *Control) claim(w http.ResponseWriter, r *http.Request) {
	var req claimRequest
	if !decodeJSON(w, r, &req, maxClaimBody) {
		return
	}
	if req.N < 1 || req.N > 10_000 {
		writeError(w, http.StatusBadRequest, "n", "must be 1..10000")
		return
	}
	if req.TTLMs < 0 {
		writeError(w, http.StatusBadRequest, "ttl_ms", "must not be negative")
		return
	}
	jobs, err := c.Index.ClaimIndex(r.Context(), claim.IndexClaim{N: req.N, Holder: req.Holder, TTLMs: req.TTLMs})
	if errors.Is(err, claim.ErrQueuedBehindLeases) {
		writeJSON(w, http.StatusOK, claimResponse{Jobs: []Job{}, QueuedBehindLeases: true})
		return
	}
	if err != nil && len(jobs) == 0 {
		c.Log.Error().Err(err).Msg("index claim failed")
		writeError(w, http.StatusServiceUnavailable, "", "index claim failed")
		return
	}
	if err != nil {
		// The scan failed after it leased these: hand them out, or they strand until their TTL.
		c.Log.Error().Err(err).Int("jobs", len(jobs)).Msg("index claim failed part way; handing out the jobs it leased")
	}
	resp := claimResponse{Jobs: make([]Job, len(jobs))}
	for i, j := range jobs {
		resp.Jobs[i] = WireJob(j)
	}
	writeJSON(w, http.StatusOK, resp)
}

// apiError is the JSON error body of every 4xx and 5xx.
type apiError struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// WriteError answers an API error: status code and the JSON body {"error": msg, "field": field}
// (field omitted when empty). The supervisor's public guards answer with it too, so that every
// refusal a client meets has the same shape.
func WriteError(w http.ResponseWriter, code int, field, msg string) {
	writeJSON(w, code, apiError{Error: msg, Field: field})
}

func writeError(w http.ResponseWriter, code int, field, msg string) { WriteError(w, code, field, msg) }

// decodeJSON reads a size-limited body holding exactly one JSON object into v, answering 413
// or 400 itself on failure. A 400 names the field when the decoder can tell it (an unknown
// field, or a value of the wrong type); anything after the object is refused, so a request is
// never half-read.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, next := dec.Token(); next != io.EOF {
			err = errors.New("data after the JSON object")
			if tooBig := new(http.MaxBytesError); errors.As(next, &tooBig) {
				err = next
			}
		}
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "", fmt.Sprintf("body over %d bytes", limit))
			return false
		}
		writeError(w, http.StatusBadRequest, jsonErrorField(err), "bad JSON: "+err.Error())
		return false
	}
	return true
}

// jsonErrorField is the field encoding/json blames in err: the path of a value of the wrong
// type, or the name of an unknown field; "" when it names none.
func jsonErrorField(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return typeErr.Field
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field, _ := strconv.Unquote(name)
		return field
	}
	return ""
}

// Client talks to worker 0 over its control socket. It implements claim.Fallback.
type Client struct {
	http *http.Client
}

// NewClient returns a client for the unix socket at path.
func NewClient(socketPath string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     time.Minute,
	}
	return &Client{http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// ErrUnavailable wraps every failure to reach worker 0 or to get a 2xx from it.
var ErrUnavailable = errors.New("api: worker 0 unavailable")

// StatusError is worker 0's answer other than 2xx. A 4xx is final (the request is refused for
// good, and sending it again cannot help); a 5xx may pass. It wraps ErrUnavailable.
type StatusError struct {
	Path string
	Code int
	Msg  string // the start of the body
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%v: %s: %d %s: %s", ErrUnavailable, e.Path, e.Code, http.StatusText(e.Code), e.Msg)
}

func (e *StatusError) Unwrap() error { return ErrUnavailable }

func (c *Client) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("api: %s: %w", path, err)
	}
	return c.postBody(ctx, path, "application/json", body, out)
}

func (c *Client) postBody(ctx context.Context, path, contentType string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://worker0"+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("api: %s: %w", path, err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return &StatusError{Path: path, Code: resp.StatusCode, Msg: string(bytes.TrimSpace(msg))}
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w: %s: bad response: %v", ErrUnavailable, path, err)
	}
	return nil
}

// ClaimIndex asks worker 0 for up to req.N jobs from the floored index scan. It returns
// claim.ErrQueuedBehindLeases when worker 0 says so.
func (c *Client) ClaimIndex(ctx context.Context, req claim.IndexClaim) ([]claim.Job, error) {
	var resp claimResponse
	if err := c.post(ctx, PathClaim, claimRequest{N: req.N, Holder: req.Holder, TTLMs: req.TTLMs}, &resp); err != nil {
		return nil, err
	}
	if resp.QueuedBehindLeases && len(resp.Jobs) == 0 {
		return nil, claim.ErrQueuedBehindLeases
	}
	jobs := make([]claim.Job, len(resp.Jobs))
	for i, j := range resp.Jobs {
		jobs[i] = j.ClaimJob()
	}
	return jobs, nil
}

// SendResults delivers a batch of results, in the binary form; worker 0 answers only after
// they are committed. A batch whose every result was fenced (409: none of its leases is held
// any more, e.g. a retry of a batch worker 0 had committed) is not an error: there is nothing
// left to deliver, and the stats say so. Any other 4xx is a *StatusError the batch cannot
// recover from by being sent again.
func (c *Client) SendResults(ctx context.Context, results []Result) (ApplyStats, error) {
	var st ApplyStats
	err := c.postBody(ctx, PathResults, ResultsContentType, EncodeResults(nil, results), &st)
	if se := (*StatusError)(nil); errors.As(err, &se) && se.Code == http.StatusConflict {
		return ApplyStats{Fenced: len(results)}, nil
	}
	return st, err
}

// Status asks worker 0 whether it serves.
func (c *Client) Status(ctx context.Context) (Status, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://worker0"+PathStatus, nil)
	if err != nil {
		return Status{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Status{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return Status{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return st, nil
}
