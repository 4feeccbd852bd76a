package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/freshq/freshq/config"
)

// The bearer token is compared in constant time (crypto/subtle) and whole: a prefix, an
// extension or a same-length guess is refused like no token at all.
func TestAuthorizeComparesTheWholeToken(t *testing.T) {
	s := &supervisor{}
	cfg := config.Default()
	cfg.Token = "s3cret-token"
	s.cfg.Store(cfg)
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
