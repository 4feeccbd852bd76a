package chrome

import (
	"net/http"
	"testing"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// A failed request is one that says the page's data did not arrive: a network error, a 5xx, a
// 408 or 429, or a 404 or 410 (a product API answering 404 is the page losing its content). A
// visitor who is not logged in, as a prerender never is, is answered 401 or 403 by a real SPA's
// /api/me or /api/cart on every load: those, and the other 4xx, are not failures of the page.
func TestSignalsFailedRequestsAreDataThatDidNotArrive(t *testing.T) {
	s := newSite(t)
	answer := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { http.Error(w, http.StatusText(code), code) }
	}
	// Not failures: the page works for a visitor who is not logged in.
	s.mux.HandleFunc("/api/me", answer(http.StatusUnauthorized))
	s.mux.HandleFunc("/api/cart", answer(http.StatusForbidden))
	s.mux.HandleFunc("/api/search", answer(http.StatusBadRequest))
	s.mux.HandleFunc("/api/prefs", answer(http.StatusUnprocessableEntity))
	// Failures: the page's data did not arrive.
	s.mux.HandleFunc("/api/product/7", answer(http.StatusNotFound))
	s.mux.HandleFunc("/api/offer/7", answer(http.StatusGone))
	s.mux.HandleFunc("/api/stock/7", answer(http.StatusRequestTimeout))
	s.mux.HandleFunc("/api/price/7", answer(http.StatusTooManyRequests))
	s.mux.HandleFunc("/api/reviews/7", answer(http.StatusServiceUnavailable))
	s.page("/anonymous", `<!doctype html><html><body><p>Blue kettle</p><script>
for (const p of ["/api/me", "/api/cart", "/api/search", "/api/prefs"]) fetch(p).catch(() => {});
</script></body></html>`)
	s.page("/lost", `<!doctype html><html><body><p>Loading…</p><script>
for (const p of ["/api/product/7", "/api/offer/7", "/api/stock/7", "/api/price/7", "/api/reviews/7"]) fetch(p).catch(() => {});
</script></body></html>`)
	r := newRenderer(t, nil)

	res := render1(t, r, render.Request{URL: s.url("/anonymous")})
	if res.Outcome != outcome.OK || res.Signals == nil {
		t.Fatalf("anonymous visitor's page: %v %s, signals %+v", res.Outcome, res.Err, res.Signals)
	}
	if sig := *res.Signals; sig.FailedRequests != 0 || len(sig.Evidence) != 0 {
		t.Errorf("401, 403, 400 and 422 counted as failed requests: %+v", sig)
	}
	for _, p := range []string{"/api/me", "/api/cart", "/api/search", "/api/prefs"} {
		if s.count(p) == 0 {
			t.Errorf("%s was not requested: the page did not run", p)
		}
	}

	res = render1(t, r, render.Request{URL: s.url("/lost")})
	if res.Signals == nil {
		t.Fatalf("page whose data did not arrive: %v %s, no signals", res.Outcome, res.Err)
	}
	if sig := *res.Signals; sig.FailedRequests != 5 {
		t.Errorf("page whose data did not arrive: %+v; want 5 failed (404, 410, 408, 429, 503)", sig)
	}
}
