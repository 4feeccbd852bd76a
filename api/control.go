// Package api is worker 0's HTTP surface, served on its unix control socket: the internal
// endpoints render workers use (the index-claim fallback and result batches) and, behind the
// supervisor's public listener, the operator API. The shapes it reads and writes, and the client
// of the control socket, are package wire's.
//
// Every handler is the same four steps: decode the request (decodeJSON, readBody, the targets
// decoder, a spooled sitemap body), call the service that does the work (package intake: the
// Applier for results, Targets for upserts, discovery, rush and wait, delete, explain and
// stored pages, Remote for remote renderers' leases, SitemapRuns for sitemap imports), hand
// any error to fail, and encode the answer (ok, created, accepted). The one place an error
// becomes a status, a field and a message is status (errors.go), a table of intake's sentinel
// errors, wire's decode errors and api's own; no handler picks a status of its own, so the
// answers the docs promise (docs/API.md, docs/SECURITY.md) are all read from there. The only other
// status written is a stored page's own, which intake.Targets.Page has checked HTTP can send.
//
// api holds no decision about the queue: what a result does, how an upsert merges, who may
// hold a lease, when a page is servable and how a sitemap run proceeds are intake's, with the
// invariants its package doc states. What is api's is HTTP: the bounds of each request body,
// the byte budget of heavy requests (Limiter), and the pprof endpoints on the socket; and,
// beside the endpoint it calls, IndexFallback, a render worker's client of the index claim.
//
// Worker 0 is the only process with a store, so everything that reads or writes Badger on
// behalf of another process comes through here. Bad input is answered 4xx with a JSON error
// naming the field; nothing is half-written.
package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/rs/zerolog"

	"context"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/leases"
	"github.com/freshq/freshq/wire"
)

// maxClaimBody bounds an internal claim request: a few numbers of JSON.
const maxClaimBody = 1 << 10

// maxValidatorsBody bounds a validators request: one key (store.MaxKeyLen bytes, base64).
const maxValidatorsBody = 4 << 10

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
		jobs[i] = leases.ClaimJob(j)
	}
	return jobs, nil
}

// Control serves the internal endpoints.
type Control struct {
	Index   claim.Fallback
	Applier *apply.Applier
	Limit   *Limiter // admits results requests by their bytes; nil: none
	Status  func() wire.Status
	Log     zerolog.Logger
	// Targets answers a render worker's question before a render (wire.PathValidators);
	// nil: never check, always render.
	Targets *intake.Targets
}

// Register adds the internal endpoints to mux.
func (c *Control) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST "+wire.PathClaim, c.claim)
	mux.HandleFunc("POST "+wire.PathResults, resultsHandler(c.Applier, c.Limit, true))
	mux.HandleFunc("GET "+wire.PathStatus, func(w http.ResponseWriter, r *http.Request) { ok(w, c.Status()) })
	mux.HandleFunc("POST "+wire.PathValidators, c.validators)
	// Profiles of worker 0, on its 0600 socket only (the public listener refuses /internal/):
	// curl --unix-socket <runtime dir>/freshq-<hash>.sock http://w0/internal/debug/pprof/profile?seconds=10
	// (docs/OPERATING.md: Files)
	mux.HandleFunc("/internal/debug/pprof/", func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/internal")
		pprof.Index(w, r)
	})
	mux.HandleFunc("/internal/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/internal/debug/pprof/trace", pprof.Trace)
}

// validators tells a render worker whether it may check a page with a conditional GET
// (intake.Targets.Validators).
func (c *Control) validators(w http.ResponseWriter, r *http.Request) {
	var req wire.ValidatorsRequest
	if err := decodeJSON(w, r, &req, maxValidatorsBody); err != nil {
		fail(w, err)
		return
	}
	if c.Targets == nil {
		ok(w, wire.Validators{})
		return
	}
	v, err := c.Targets.Validators(req.Key)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, v)
}

// claim hands out up to N jobs from worker 0's floored index scan (leases.ClaimIndex).
func (c *Control) claim(w http.ResponseWriter, r *http.Request) {
	var req wire.ClaimRequest
	if err := decodeJSON(w, r, &req, maxClaimBody); err != nil {
		fail(w, err)
		return
	}
	resp, err := leases.ClaimIndex(r.Context(), c.Index, req, c.Log)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, resp)
}

// decodeJSON reads a size-limited body holding exactly one JSON object into v. A body over
// limit is an *http.MaxBytesError; one that does not decode a *badJSON naming the field when
// the decoder can tell it (an unknown field, or a value of the wrong type). Anything after the
// object is refused, so a request is never half-read.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
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
	if err == nil {
		return nil
	}
	if tooBig := new(http.MaxBytesError); errors.As(err, &tooBig) {
		return tooBig
	}
	return &badJSON{field: wire.JSONErrorField(err), err: err}
}
