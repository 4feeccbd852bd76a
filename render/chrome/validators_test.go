package chrome

import (
	"net/http"
	"testing"
	"time"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// A page whose content is its document (it asked no site for data) carries the document's
// validators, ETag and Last-Modified, so that worker 0 keeps them and the page's next render may
// be a conditional GET of the document (a 304: no browser render). A page that fetched its data
// from its site carries none: the document's validators describe the shell, not the data the
// page shows, and a 304 on the shell would hold a page whose data changed; nor does a page that
// fetched data from another site.
func TestDocumentValidators(t *testing.T) {
	s := newSite(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	const etag, modified = `"doc-v7"`, "Mon, 07 Dec 2026 10:00:00 GMT"
	withValidators := func(html string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("ETag", etag)
			w.Header().Set("Last-Modified", modified)
			_, _ = w.Write([]byte(html))
		}
	}
	s.mux.HandleFunc("/article", withValidators(`<!doctype html><html><body><h1>Blue kettle</h1><p>20 EUR</p></body></html>`))
	s.mux.HandleFunc("/app", withValidators(`<!doctype html><html><body><div id=app>Loading…</div><script>
fetch("/api/product/7").then(r => r.text()).then(t => { document.getElementById("app").textContent = t })</script></body></html>`))
	s.mux.HandleFunc("/api/product/7", delayed(100*time.Millisecond, hang, "Blue kettle, 20 EUR"))
	// A page whose data comes from another site (a headless CMS, a price service): its document
	// says nothing of that data either.
	s.mux.HandleFunc("/cms", withValidators(`<!doctype html><html><body><div id=app>Loading…</div><script>
fetch("`+s.on("cdn.test", "/cms/price/7")+`").then(r => r.text()).then(t => { document.getElementById("app").textContent = t })</script></body></html>`))
	s.mux.HandleFunc("/cms/price/7", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_, _ = w.Write([]byte("Blue kettle, 20 EUR"))
	})
	r := newRendererWithCDN(t, nil)
	for _, c := range []struct {
		path, etag, modified string
	}{
		{"/article", etag, modified},
		{"/app", "", ""},
		{"/cms", "", ""},
	} {
		res := render1(t, r, render.Request{URL: s.url(c.path)})
		if res.Outcome != outcome.OK {
			t.Fatalf("%s: %v %s", c.path, res.Outcome, res.Err)
		}
		if got, want := res.Headers["etag"], c.etag; got != want {
			t.Errorf("%s: etag %q, want %q (headers %v)", c.path, got, want, res.Headers)
		}
		if got, want := res.Headers["last-modified"], c.modified; got != want {
			t.Errorf("%s: last-modified %q, want %q", c.path, got, want)
		}
	}
}
