// Package api is worker 0's HTTP surface, served on its unix control socket: the internal
// endpoints render workers use (the index-claim fallback and result batches) and, behind the
// supervisor's public listener, the operator API. The shapes it reads and writes, and the client
// of the control socket, are package wire's.
//
// A handler decodes its request, calls the service that does the work, maps the error it got
// to an answer in one place (status: each of intake's sentinel errors has one status, field
// and message), and encodes the answer. Writes are intake's: results (intake.Applier), upserts,
// discovery, rush and wait, and delete (intake.Targets), with the invariants its package doc
// states; the sitemap runs' registry and their handlers are here, and each run's chunks are
// upserted by intake.Targets.UpsertChunk through the runs' gate, which Close shuts. Reads
// (GET /v1/targets, /v1/pages, /v1/queue, status) read the store and the segment directly.
//
// Worker 0 is the only process with a store, so everything that reads or writes Badger on
// behalf of another process comes through here. Bad input is answered 4xx with a JSON error
// naming the field; nothing is half-written.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/rs/zerolog"

	"context"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/wire"
)

// maxClaimBody bounds an internal claim request: a few numbers of JSON.
const maxClaimBody = 1 << 10

// WireJob converts a granted job for the wire.
func WireJob(j claim.Job) wire.Job {
	return wire.Job{Key: j.Key, KeyHash: j.KeyHash, DueAtMs: j.DueAtMs, CadenceMs: j.CadenceMs, Submitted: j.Submitted,
		Lane: uint8(j.Lane), Score: j.Score, Source: j.Source.String(), Lease: intake.WireLease(j.Lease)}
}

// ClaimJob converts a wire job back: what a render worker claimed through worker 0.
func ClaimJob(j wire.Job) claim.Job {
	src := claim.SourceIndex
	if j.Source == claim.SourceReady.String() {
		src = claim.SourceReady
	}
	return claim.Job{Key: j.Key, KeyHash: j.KeyHash, DueAtMs: j.DueAtMs, CadenceMs: j.CadenceMs, Submitted: j.Submitted,
		Lane: policy.Lane(j.Lane), Score: j.Score, Source: src, Lease: intake.ShmLease(j.Lease)}
}

// IndexFallback is a render worker's claim.Fallback: worker 0's floored index scan, asked for
// over the control socket.
type IndexFallback struct {
	Client *wire.Client
}

// ClaimIndex asks worker 0 for up to req.N jobs from the floored index scan. It returns
// claim.ErrQueuedBehindLeases when worker 0 says so.
func (f IndexFallback) ClaimIndex(ctx context.Context, req claim.IndexClaim) ([]claim.Job, error) {
	resp, err := f.Client.Claim(ctx, wire.ClaimRequest{N: req.N, Holder: req.Holder, TTLMs: req.TTLMs})
	if err != nil {
		return nil, err
	}
	if resp.QueuedBehindLeases && len(resp.Jobs) == 0 {
		return nil, claim.ErrQueuedBehindLeases
	}
	jobs := make([]claim.Job, len(resp.Jobs))
	for i, j := range resp.Jobs {
		jobs[i] = ClaimJob(j)
	}
	return jobs, nil
}

// Control serves the internal endpoints.
type Control struct {
	Index   claim.Fallback
	Applier *intake.Applier
	Limit   *Limiter // admits results requests by their bytes; nil: none
	Status  func() wire.Status
	Log     zerolog.Logger
}

// Register adds the internal endpoints to mux.
func (c *Control) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST "+wire.PathClaim, c.claim)
	mux.HandleFunc("POST "+wire.PathResults, resultsHandler(c.Applier, c.Limit, true))
	mux.HandleFunc("GET "+wire.PathStatus, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, c.Status()) })
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
	var req wire.ClaimRequest
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
		writeJSON(w, http.StatusOK, wire.ClaimResponse{Jobs: []wire.Job{}, QueuedBehindLeases: true})
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
	resp := wire.ClaimResponse{Jobs: make([]wire.Job, len(jobs))}
	for i, j := range jobs {
		resp.Jobs[i] = WireJob(j)
	}
	writeJSON(w, http.StatusOK, resp)
}

func writeJSON(w http.ResponseWriter, code int, v any) { wire.WriteJSON(w, code, v) }

func writeError(w http.ResponseWriter, code int, field, msg string) {
	wire.WriteError(w, code, field, msg)
}

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
		writeError(w, http.StatusBadRequest, wire.JSONErrorField(err), "bad JSON: "+err.Error())
		return false
	}
	return true
}
