package chrome

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// The document request of a chrome render, and each of its redirects, carries the render's
// marker (X-Prerender: 1), so that a site's prerender middleware passes it on to the site
// instead of sending it back to the cache.
func TestDocumentRequestsCarryTheMarker(t *testing.T) {
	s := newSite(t)
	var mu sync.Mutex
	marks := map[string]string{}
	note := func(r *http.Request) {
		mu.Lock()
		marks[r.URL.Path] = r.Header.Get(render.MarkerHeader)
		mu.Unlock()
	}
	s.mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		note(r)
		http.Redirect(w, r, "/new", http.StatusMovedPermanently)
	})
	s.mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) {
		note(r)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>new</title><p>moved here</p>"))
	})
	r := newRenderer(t, nil)
	res := render1(t, r, render.Request{URL: s.url("/old")})
	if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), "moved here") {
		t.Fatalf("render: %v %s", res.Outcome, res.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/old", "/new"} {
		if marks[path] != render.MarkerValue {
			t.Errorf("the request for %s carried %s %q, want %q", path, render.MarkerHeader, marks[path], render.MarkerValue)
		}
	}
}
