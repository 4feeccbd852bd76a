package render

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/freshq/freshq/outcome"
)

// A page may declare its own status with the prerender meta tags; the http renderer stores
// that status (and, for a redirect, its Location) instead of the response's 200.
func TestHTTPHonoursPrerenderStatusTags(t *testing.T) {
	o := newOrigin(t)
	serve := func(path, head string) {
		o.mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<!doctype html><html><head>%s</head><body><p>x</p></body></html>", head)
		})
	}
	serve("/gone", `<meta name="prerender-status-code" content="404">`)
	serve("/moved", `<meta name="prerender-status-code" content="301"><meta name="prerender-header" content="Location: /new">`)
	serve("/moved-nowhere", `<meta name="prerender-status-code" content="302">`)
	serve("/fine", `<meta name="prerender-status-code" content="200">`)
	serve("/bogus", `<meta name="prerender-status-code" content="999">`)
	h := newHTTP(t, nil)
	for _, c := range []struct {
		path     string
		want     outcome.Outcome
		status   int
		location string
	}{
		{"/gone", outcome.NotFound, 404, ""},
		{"/moved", outcome.OK, 301, o.URL + "/new"},
		{"/moved-nowhere", outcome.Failed, 302, ""},
		{"/fine", outcome.OK, 200, ""},
		{"/bogus", outcome.OK, 200, ""}, // not a status: ignored
	} {
		res := h.Render(context.Background(), Request{URL: o.URL + c.path})
		if res.Outcome != c.want || res.Status != c.status || res.Headers["location"] != c.location {
			t.Errorf("%s: %v %d location %q (%s); want %v %d %q", c.path, res.Outcome, res.Status, res.Headers["location"], res.Err, c.want, c.status, c.location)
		}
		if c.want == outcome.OK && len(res.Body) == 0 {
			t.Errorf("%s: no body", c.path)
		}
	}
}

func TestDeclaredStatus(t *testing.T) {
	for _, c := range []struct {
		page     string
		status   int
		location string
	}{
		{`<meta name="prerender-status-code" content="404">`, 404, ""},
		{`<META NAME="Prerender-Status-Code" CONTENT=" 410 ">`, 410, ""},
		{`<meta name="prerender-status-code" content="301"><meta name="prerender-header" content="location:https://a.example/b">`, 301, "https://a.example/b"},
		{`<meta name="prerender-header" content="Location: https://a.example/b">`, 0, ""}, // a header without a status
		{`<script>"<meta name=\"prerender-status-code\" content=\"404\">"</script>`, 0, ""},
		{`<meta name="prerender-status-code" content="abc">`, 0, ""},
		{`<meta name="prerender-status-code" content="99">`, 0, ""},
		{``, 0, ""},
	} {
		status, loc := declaredStatus([]byte(c.page))
		if status != c.status || loc != c.location {
			t.Errorf("%s: %d %q, want %d %q", c.page, status, loc, c.status, c.location)
		}
	}
}
