package api

import (
	"io"
	"mime"
	"net/http"
	"os"

	"github.com/freshq/freshq/sitemapruns"
	"github.com/freshq/freshq/wire"
)

// Sitemap request limits.
const (
	maxSitemapBody    = 64 << 20 // a posted sitemap body, compressed or not
	maxSitemapRequest = 64 << 10 // a JSON request {"url": ...}
	sitemapPostHeld   = 1 << 20  // what a POST holds in memory: the body is spooled to disk
)

// Sitemaps serves /v1/sitemaps: POST starts a run (sitemapruns.Runs.Submit) from
// {"url": ...} or from an XML body (gzip accepted), spooled to a temporary file, and answers
// 202 with its id; GET /v1/sitemaps/{id} reports a run's progress and result. The runs, and
// their start and stop, are sitemapruns.Runs'.
type Sitemaps struct {
	Runs  *sitemapruns.Runs
	Limit *Limiter // heavy requests of worker 0 (a posted body); nil: none
}

// Register adds the endpoints to mux.
func (s *Sitemaps) Register(mux *http.ServeMux) {
	mux.Handle("POST /v1/sitemaps", s.Limit.Wrap(sitemapPostHeld, http.HandlerFunc(s.post)))
	mux.HandleFunc("GET /v1/sitemaps/{id}", s.get)
}

func (s *Sitemaps) post(w http.ResponseWriter, r *http.Request) {
	req, body, err := readSitemapRequest(w, r)
	if err != nil {
		fail(w, err)
		return
	}
	run, err := s.Runs.Submit(req, body)
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Location", "/v1/sitemaps/"+run.ID)
	accepted(w, map[string]string{"id": run.ID, "status": run.Status})
}

// readSitemapRequest decodes a POST /v1/sitemaps: a JSON {"url": ..., "device": ...}, or a
// sitemap file as the body (device in ?device=) spooled to a temporary file, which the caller
// owns.
func readSitemapRequest(w http.ResponseWriter, r *http.Request) (req wire.SitemapRequest, body *os.File, err error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "", "application/json":
		err = decodeJSON(w, r, &req, maxSitemapRequest)
		return req, nil, err
	case "application/xml", "text/xml", "application/gzip", "application/x-gzip":
		req.Device = r.URL.Query().Get("device")
		body, err = spool(w, r)
		return req, body, err
	}
	return req, nil, errMediaType
}

// spool copies a posted sitemap to a temporary file, so that the request holds little memory
// whatever the body's size.
func spool(w http.ResponseWriter, r *http.Request) (*os.File, error) {
	f, err := os.CreateTemp("", "freshq-sitemap-*")
	if err != nil {
		return nil, &spoolError{err}
	}
	n, err := io.Copy(f, http.MaxBytesReader(w, r.Body, maxSitemapBody))
	switch {
	case err != nil:
		err = withHint(bodyError(err), "post the sitemap's URL instead")
	case n == 0:
		err = errEmptyBody
	default:
		return f, nil
	}
	f.Close()
	os.Remove(f.Name())
	return nil, err
}

func (s *Sitemaps) get(w http.ResponseWriter, r *http.Request) {
	run, err := s.Runs.Run(r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, run)
}
