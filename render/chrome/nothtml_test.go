package chrome

import (
	"net/http"
	"testing"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// A document that is not HTML (an API's JSON, a text file) is passed through as the origin sent
// it, its type and body, never captured as the browser's viewer page for it (which is HTML).
func TestNonHTMLDocumentIsPassedThrough(t *testing.T) {
	s := newSite(t)
	const product = `{"id":1,"name":"Red shoes"}`
	s.mux.HandleFunc("/api/products/1", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(product))
	})
	s.mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("User-agent: *\nDisallow:\n"))
	})
	r := newRenderer(t, nil)
	for path, want := range map[string]struct{ ct, body string }{
		"/api/products/1": {"application/json", product},
		"/robots.txt":     {"text/plain; charset=utf-8", "User-agent: *\nDisallow:\n"},
	} {
		res := render1(t, r, render.Request{URL: s.url(path)})
		if res.Outcome != outcome.OK || res.Status != 200 || string(res.Body) != want.body || res.Headers["content-type"] != want.ct {
			t.Errorf("%s: %v %d %v %q, want ok 200 %s %q", path, res.Outcome, res.Status, res.Headers, res.Body, want.ct, want.body)
		}
	}
}
