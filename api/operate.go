package api

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/wire"
)

// maxOperateRequest bounds a discover or prioritize request.
const maxOperateRequest = wire.MaxOperateBody

// Operate serves the operator actions: POST /v1/discover, POST /v1/prioritize, GET /v1/pages
// (a read, never a write: a page on another site can make an operator's browser send a GET)
// and POST /v1/pages (render on miss), and POST /recache (the hosted prerender service's
// recache call). It writes through Targets (its Writer and Locks).
type Operate struct {
	Targets *intake.Targets // worker 0's one targets service (intake.NewTargets)
	Misses  *misses.Flights // render on miss (POST /v1/pages?wait=); nil: a wait is refused
}

// Register adds the endpoints to mux.
func (o *Operate) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/discover", o.discover)
	mux.HandleFunc("POST /v1/prioritize", o.prioritize)
	mux.HandleFunc("GET /v1/pages", o.page)
	mux.HandleFunc("POST /v1/pages", o.page)
	mux.HandleFunc("POST /recache", o.recache)
}

// discover turns a crawler hit on an unknown page into a discovered target, due now
// (intake.Targets.Discover): 201 when created, 200 when it was known already.
func (o *Operate) discover(w http.ResponseWriter, r *http.Request) {
	var req wire.DiscoverRequest
	if err := decodeJSON(w, r, &req, maxOperateRequest); err != nil {
		fail(w, err)
		return
	}
	key, isNew, err := o.intake().Discover(req.URL, req.Device)
	if err != nil {
		fail(w, err)
		return
	}
	answer := map[string]any{"key": string(key), "created": isNew}
	if isNew {
		created(w, answer)
		return
	}
	ok(w, answer)
}

// prioritize rushes or waits a url or a prefix (intake.Targets.Prioritize); it replaces every
// sentinel-due-time trick.
func (o *Operate) prioritize(w http.ResponseWriter, r *http.Request) {
	var req wire.PrioritizeRequest
	if err := decodeJSON(w, r, &req, maxOperateRequest); err != nil {
		fail(w, err)
		return
	}
	matched, err := o.intake().Prioritize(req)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, map[string]any{"mode": req.Mode, "matched": matched})
}

func (o *Operate) intake() *intake.Targets { return o.Targets }

// PageCSP is the Content-Security-Policy of every stored page GET /v1/pages serves. A stored
// page is someone else's HTML served from the API's own origin, so it must not run there: no
// script of any kind (default-src 'none' and no script-src), and a sandbox without
// allow-scripts, allow-forms or allow-same-origin, which gives the document an opaque origin —
// even a request it could make would arrive cross-site and be refused by the listener. Images,
// styles and fonts may load from anywhere so that an operator who opens a page sees it as it
// looks; none of them can run code. frame-ancestors 'none' keeps the API's origin out of frames.
const PageCSP = "default-src 'none'; img-src * data:; style-src * 'unsafe-inline'; font-src * data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; sandbox"

// page serves the stored page of ?url=&device= with its age (intake.Targets.Page says which
// pages are served). X-Freshq-Stale says whether it is past its cadence. Every page carries
// X-Content-Type-Options: nosniff and PageCSP, set after the page's own headers so that none
// of those can loosen them. The answer's status is the page's own, which Page has checked is
// one HTTP can send. POST with ?wait= renders a missing page on miss and waits for it
// (servedPage); a client that gives up meanwhile gets no answer, and none is an error. A GET
// with ?wait= is refused: it would write.
func (o *Operate) page(w http.ResponseWriter, r *http.Request) {
	key, err := keyOf(r, o.Targets.Settings())
	if err != nil {
		fail(w, err)
		return
	}
	pg, err := o.servedPage(r, key)
	if err != nil && r.Context().Err() != nil {
		return // the client is gone: nobody reads an answer
	}
	if err != nil {
		fail(w, err)
		return
	}
	body, err := intake.PlainBody(&pg.Page)
	if err != nil {
		fail(w, err)
		return
	}
	for _, h := range pg.Headers {
		if !strings.EqualFold(h.Name, "content-encoding") { // the body is sent decoded
			w.Header().Set(h.Name, h.Value)
		}
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", PageCSP)
	w.Header().Set("Age", strconv.FormatInt(max(pg.AgeMs, 0)/1000, 10))
	w.Header().Set("X-Freshq-Stale", strconv.FormatBool(pg.Stale))
	w.WriteHeader(int(pg.Status))
	w.Write(body)
}

// maxRecacheURLs bounds the URLs of one POST /recache, as the hosted service's own call does.
const maxRecacheURLs = 1000

// recacheRequest is the hosted prerender service's recache call: one url or a list of urls.
// prerenderToken is the hosted service's account token; the admin listener accepts the admin
// token there in place of the bearer token (the supervisor checks it before the call gets
// here), so it is not read again.
type recacheRequest struct {
	PrerenderToken string   `json:"prerenderToken"`
	URL            string   `json:"url"`
	URLs           []string `json:"urls"`
	Device         string   `json:"device"`
}

// recache rushes the targets a POST /recache names (intake.Targets.Prioritize, mode rush), so
// that tooling written for the hosted service works unchanged: for its device, or, when it
// names none, for every device the configuration renders. A URL that is not stored is filed
// first, as discover does. It answers how many were rushed, or the first refusal
// naming the field (url, or urls[i]). The whole list is checked before anything is written,
// so a refusal files and rushes nothing: every URL must give a key the store can hold, and,
// when render.domains is set, name a host it allows (a target of another host would only ever
// render as blocked; 404, as POST /v1/pages refuses it). With render.domains empty every host
// is the renderer's to fetch, and every host is taken.
func (o *Operate) recache(w http.ResponseWriter, r *http.Request) {
	var req recacheRequest
	if err := decodeJSON(w, r, &req, maxOperateRequest); err != nil {
		fail(w, err)
		return
	}
	urls, field := req.URLs, "urls"
	switch {
	case req.URL != "" && len(req.URLs) > 0:
		fail(w, &intake.FieldError{Field: "url", Err: errors.New("give url or urls, not both")})
		return
	case req.URL != "":
		urls, field = []string{req.URL}, "url"
	case len(urls) == 0:
		fail(w, &intake.FieldError{Field: "url", Err: errors.New("give url or urls")})
		return
	case len(urls) > maxRecacheURLs:
		fail(w, &intake.FieldError{Field: "urls", Err: fmt.Errorf("%d urls, at most %d", len(urls), maxRecacheURLs)})
		return
	}
	svc := o.intake()
	set := o.Targets.Settings()
	devices := []string{req.Device}
	if req.Device == "" {
		// A recache names a page, not a device: every device's crawler is served its own copy,
		// and each must get the new content.
		devices = slices.Sorted(maps.Keys(set.Devices))
	}
	for i, u := range urls {
		name := field
		if field == "urls" {
			name = "urls[" + strconv.Itoa(i) + "]"
		}
		for _, device := range devices {
			if err := o.Targets.CheckRenderable(u, device); err != nil {
				if fe := (*intake.FieldError)(nil); errors.As(err, &fe) && fe.Field == "url" {
					fe.Field = name
				}
				fail(w, err)
				return
			}
		}
	}
	rushed := 0
	for _, u := range urls {
		for _, device := range devices {
			if _, _, err := svc.Discover(u, device); err != nil {
				fail(w, err)
				return
			}
			n, err := svc.Prioritize(wire.PrioritizeRequest{Mode: "rush", URL: u, Device: device})
			if err != nil {
				fail(w, err)
				return
			}
			rushed += n
		}
	}
	ok(w, map[string]any{"rushed": rushed})
}
