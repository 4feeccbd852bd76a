package api

import (
	"errors"
	"net/http"

	"github.com/freshq/freshq/renderlog"
	"github.com/freshq/freshq/wire"
)

// Renders serves worker 0's log of recent renders (package renderlog): GET /v1/renders?url=
// (a page's, newest first) and GET /v1/failures (the recent failures, newest first).
type Renders struct {
	Log *renderlog.Log
}

// Register adds the endpoints to mux.
func (x *Renders) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/renders", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		u := q.Get("url")
		if u == "" {
			fail(w, &wire.FieldError{Field: "url", Err: errors.New("give the page's absolute URL")})
			return
		}
		ok(w, map[string]any{"renders": x.Log.Page(u, q.Get("device"))})
	})
	mux.HandleFunc("GET /v1/failures", func(w http.ResponseWriter, _ *http.Request) {
		ok(w, map[string]any{"failures": x.Log.Failures()})
	})
}
