package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/wire"
)

// The bearer token is compared in constant time (crypto/subtle) and whole: a prefix, an
// extension or a same-length guess is refused like no token at all.
func TestAuthorizeComparesTheWholeToken(t *testing.T) {
	cfg := config.Default()
	cfg.Token = "s3cret-token"
	s := newFixture(t, cfg, "")
	h := s.authorize(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for header, want := range map[string]int{
		"":                     http.StatusUnauthorized,
		"Bearer ":              http.StatusUnauthorized,
		"Bearer s3cret":        http.StatusUnauthorized,
		"Bearer s3cret-token2": http.StatusUnauthorized,
		"Bearer s3cret-tokeN":  http.StatusUnauthorized,
		"Basic s3cret-token":   http.StatusUnauthorized,
		"Bearer s3cret-token":  http.StatusNoContent,
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/queue", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Authorization %q: %d, want %d", header, w.Code, want)
		}
	}
}

// POST /recache may carry the admin token in its body (prerenderToken), as the hosted prerender
// service's tools send it: it is compared whole, read only on that call and only without an
// Authorization header, and the body reaches the API unchanged. A body over the API's bound
// is refused unread.
func TestRecacheTokenInTheBody(t *testing.T) {
	cfg := config.Default()
	cfg.Token = "s3cret-token"
	s := newFixture(t, cfg, "")
	var seen string
	h := s.authorize(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = string(b)
		w.WriteHeader(http.StatusNoContent)
	}))
	good := `{"prerenderToken":"s3cret-token","url":"https://shop.test/"}`
	for _, tc := range []struct {
		method, path, body, auth string
		want                     int
	}{
		{http.MethodPost, "/recache", good, "", http.StatusNoContent},
		{http.MethodPost, "/recache", `{"prerenderToken":"s3cret-tokeN","url":"https://shop.test/"}`, "", http.StatusUnauthorized},
		{http.MethodPost, "/recache", `{"prerenderToken":"s3cret","url":"https://shop.test/"}`, "", http.StatusUnauthorized},
		{http.MethodPost, "/recache", `{"url":"https://shop.test/"}`, "", http.StatusUnauthorized},
		{http.MethodPost, "/recache", `not json`, "", http.StatusUnauthorized},
		{http.MethodPost, "/recache", good + strings.Repeat(" ", wire.MaxOperateBody), "", http.StatusUnauthorized},
		{http.MethodPost, "/v1/prioritize", good, "", http.StatusUnauthorized},
		{http.MethodPost, "/recache", good, "Bearer wrong", http.StatusUnauthorized},
		{http.MethodPost, "/recache", `{"url":"https://shop.test/"}`, "Bearer s3cret-token", http.StatusNoContent},
	} {
		seen = ""
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s %s %.60q (Authorization %q): %d, want %d", tc.method, tc.path, tc.body, tc.auth, w.Code, tc.want)
		}
		if w.Code == http.StatusNoContent && seen != tc.body {
			t.Errorf("%s %s: the API read %q, want the body as sent", tc.method, tc.path, seen)
		}
	}
}
