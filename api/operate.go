package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/rows"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Operate serves the operator actions: POST /v1/discover, POST /v1/prioritize and
// GET /v1/pages. It writes through Targets (its Writer and Locks).
type Operate struct {
	Targets *Targets
	Seg     *shm.Segment // whose leases a rush or wait revokes; nil: none (tests of other things)
}

// Register adds the endpoints to mux.
func (o *Operate) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/discover", o.discover)
	mux.HandleFunc("POST /v1/prioritize", o.prioritize)
	mux.HandleFunc("GET /v1/pages", o.page)
}

// discover turns a crawler hit on an unknown page into a discovered target, due now
// (intake.Targets.Discover): 201 when created, 200 when it was known already.
func (o *Operate) discover(w http.ResponseWriter, r *http.Request) {
	var req wire.DiscoverRequest
	if !decodeJSON(w, r, &req, 1<<20) {
		return
	}
	key, created, err := o.intake().Discover(req.URL, req.Device)
	if err != nil {
		fail(w, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, map[string]any{"key": string(key), "created": created})
}

// prioritize rushes or waits a url or a prefix (intake.Targets.Prioritize); it replaces every
// sentinel-due-time trick.
func (o *Operate) prioritize(w http.ResponseWriter, r *http.Request) {
	var req wire.PrioritizeRequest
	if !decodeJSON(w, r, &req, 1<<20) {
		return
	}
	matched, err := o.intake().Prioritize(req)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"mode": req.Mode, "matched": matched})
}

// intake is the write side, sharing the store, writer and locks of o.Targets.
func (o *Operate) intake() *intake.Targets {
	svc := o.Targets.intake()
	svc.Seg = o.Seg
	return svc
}

// PageCSP is the Content-Security-Policy of every stored page GET /v1/pages serves. A stored
// page is someone else's HTML served from the API's own origin, so it must not run there: no
// script of any kind (default-src 'none' and no script-src), and a sandbox without
// allow-scripts, allow-forms or allow-same-origin, which gives the document an opaque origin —
// even a request it could make would arrive cross-site and be refused by the listener. Images,
// styles and fonts may load from anywhere so that an operator who opens a page sees it as it
// looks; none of them can run code. frame-ancestors 'none' keeps the API's origin out of frames.
const PageCSP = "default-src 'none'; img-src * data:; style-src * 'unsafe-inline'; font-src * data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; sandbox"

// page serves the stored page of ?url=&device= with its age. Within its cadence plus the
// route's stale-while-revalidate window it is served (X-Freshq-Stale says whether it is past
// its cadence); past the window the answer is 404 with the reason. Every page carries
// X-Content-Type-Options: nosniff and PageCSP, set after the page's own headers so that none
// of those can loosen them. A stored status that is not a final HTTP status (200–599) is
// answered 502 with a JSON error: a page stored by an older version or a faulty renderer is
// refused, not passed to WriteHeader, which panics on a code it cannot send.
func (o *Operate) page(w http.ResponseWriter, r *http.Request) {
	t := o.Targets
	pol := t.Policy()
	key, ok := keyOf(w, r, pol)
	if !ok {
		return
	}
	pg, err := t.Store.GetPage(key)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "url", "no rendered page")
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "", err.Error())
		return
	}
	row, err := t.Store.GetSchedule(key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusServiceUnavailable, "", err.Error())
		return
	}
	pr := rows.Policy(key, row)
	cadence, _ := pol.Cadence(&pr)
	_, swr := pol.RouteOf(key)
	age := t.Now() - pg.RenderedAtMs
	if age > cadence+swr {
		writeError(w, http.StatusNotFound, "url", fmt.Sprintf("page is %ds old, past its cadence (%ds) plus its swr window (%ds)",
			age/1000, cadence/1000, swr/1000))
		return
	}
	if !intake.FinalStatus(int(pg.Status)) {
		writeError(w, http.StatusBadGateway, "", fmt.Sprintf("the stored page has status %d, which is not a final HTTP status (200-599); it is not served until the page is rendered again", pg.Status))
		return
	}
	for _, h := range pg.Headers {
		w.Header().Set(h.Name, h.Value)
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", PageCSP)
	w.Header().Set("Age", strconv.FormatInt(max(age, 0)/1000, 10))
	w.Header().Set("X-Freshq-Stale", strconv.FormatBool(age > cadence))
	w.WriteHeader(int(pg.Status))
	w.Write(pg.Body)
}
