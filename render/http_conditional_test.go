package render

import (
	"context"
	"net/http"
	"testing"

	"github.com/freshq/freshq/outcome"
)

// An http render given the page's validators is the conditional check itself: a 304 is its
// result (ok, status 304, no body, the new validators), and a 200 is the page, fetched once.
// Checking first and rendering after a 200 fetched every changed page twice.
func TestHTTPConditionalRenderFetchesOnce(t *testing.T) {
	o := newOrigin(t)
	current := `"v1"`
	var conditional int
	o.mux.HandleFunc("/p", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") != "" {
			conditional++
		}
		w.Header().Set("ETag", current)
		if r.Header.Get("If-None-Match") == current {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(page))
	})
	h := newHTTP(t, nil)
	get := func(v *Validators) Result {
		return h.Render(context.Background(), Request{Key: []byte("desktop|" + o.URL + "/p"), URL: o.URL + "/p", Device: "desktop", Validators: v})
	}

	res := get(&Validators{ETag: `"v1"`})
	expect(t, res, outcome.OK, StageHeaders, http.StatusNotModified)
	if res.Body != nil || res.Headers["etag"] != `"v1"` {
		t.Fatalf("304 result: body %q, headers %v; want no body and the etag", res.Body, res.Headers)
	}

	current = `"v2"`
	before := o.hits.Load()
	res = get(&Validators{ETag: `"v1"`})
	expect(t, res, outcome.OK, StageBody, http.StatusOK)
	if string(res.Body) != page {
		t.Fatalf("changed page: body %q", res.Body)
	}
	if n := o.hits.Load() - before; n != 1 {
		t.Fatalf("a changed page took %d requests of the origin, want 1", n)
	}
	if conditional != 2 {
		t.Fatalf("the origin saw %d conditional requests, want 2", conditional)
	}

	// Without validators a 304 is nobody's answer: not a result to apply as "unchanged".
	o.mux.HandleFunc("/odd", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) })
	res = h.Render(context.Background(), Request{URL: o.URL + "/odd", Device: "desktop"})
	if res.Outcome == outcome.OK {
		t.Fatalf("an unasked 304 rendered ok (status %d)", res.Status)
	}
}

// The validators go with the page's own request only: a redirect's target is another resource,
// whose 304 would verify a page never asked about.
func TestHTTPConditionalRenderDropsValidatorsOnRedirect(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/from", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/to", http.StatusFound) })
	var sawValidator bool
	o.mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" {
			sawValidator = true
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(page))
	})
	h := newHTTP(t, nil)
	res := h.Render(context.Background(), Request{URL: o.URL + "/from", Device: "desktop",
		Validators: &Validators{ETag: `"x"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT"}})
	if sawValidator {
		t.Fatal("the redirect's target was asked conditionally")
	}
	expect(t, res, outcome.OK, StageBody, http.StatusOK)
}
