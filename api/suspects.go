package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/wire"
)

// Suspects serves the suspect renders worker 0 keeps beside the good pages they did not
// replace (apply.Suspects): GET /v1/suspects lists them (of one site with ?site=),
// GET /v1/suspects/page returns one's body, and POST /v1/suspects/accept applies one as its
// page now (apply.Applier.Accept), the operator's word in place of the renders' agreement.
type Suspects struct {
	Applier *apply.Applier // worker 0's Applier, whose verdicts keep the suspects
}

// Register adds the endpoints to mux.
func (s *Suspects) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/suspects", s.list)
	mux.HandleFunc("GET /v1/suspects/page", s.page)
	mux.HandleFunc("POST /v1/suspects/accept", s.accept)
}

// list answers the kept suspects, newest first: every one, or those of ?site= (a host, taken
// to its site as render.domains groups hosts).
func (s *Suspects) list(w http.ResponseWriter, r *http.Request) {
	site := ""
	if q := r.URL.Query(); q.Has("site") {
		host := q.Get("site")
		if host == "" || strings.ContainsAny(host, "/?#@ \t") {
			fail(w, &wire.FieldError{Field: "site", Err: errors.New("a host name, like shop.example")})
			return
		}
		site = s.Applier.Settings().SiteOfHost(strings.ToLower(host))
	}
	kept := s.Applier.KeptSuspects(site)
	out := wire.SuspectList{Site: site, Suspects: make([]wire.Suspect, 0, len(kept))}
	for _, k := range kept {
		out.Suspects = append(out.Suspects, wire.Suspect{Key: k.Key, URL: k.URL, Device: k.Device, Reasons: k.Reasons.Names(),
			AtMs: k.AtMs, AgreeCount: k.Agree, Status: k.Status, Bytes: len(k.Body)})
		out.KeptBytes += int64(len(k.Body))
	}
	ok(w, out)
}

// page answers the kept suspect body of ?url=&device= as GET /v1/pages answers a stored page:
// its own content type, X-Content-Type-Options: nosniff and PageCSP, so that it runs no script
// on the API's origin; 404 naming url when none is kept.
func (s *Suspects) page(w http.ResponseWriter, r *http.Request) {
	key, err := keyOf(r, s.Applier.Settings())
	if err != nil {
		fail(w, err)
		return
	}
	k, found := s.Applier.KeptSuspect(key)
	if !found {
		fail(w, &intake.FieldError{Field: "url", Err: intake.ErrNotFound})
		return
	}
	if ct, has := k.Headers["content-type"]; has {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", PageCSP)
	w.Header().Set("X-Freshq-Suspect", strings.Join(k.Reasons.Names(), ","))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(k.Body)
}

// accept applies the kept suspect of {url, device} as its page now.
func (s *Suspects) accept(w http.ResponseWriter, r *http.Request) {
	var req wire.AcceptSuspect
	if err := decodeJSON(w, r, &req, maxOperateRequest); err != nil {
		fail(w, err)
		return
	}
	key, err := intake.Key(req.URL, req.Device, intake.KeyingOf(s.Applier.Settings()))
	if err != nil {
		fail(w, err)
		return
	}
	k, err := s.Applier.Accept(key)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, map[string]any{"accepted": k.Key, "reasons": k.Reasons.Names(), "bytes": len(k.Body)})
}
