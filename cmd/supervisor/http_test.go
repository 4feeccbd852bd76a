package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/freshq/freshq/config"
)

func TestBearerTokenGuardsEverythingButHealth(t *testing.T) {
	s := &supervisor{}
	cfg := config.Default()
	cfg.Token = "s3cret"
	s.cfg.Store(cfg)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := s.authorize(ok)
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/v1/queue", "", http.StatusUnauthorized},
		{"/v1/queue", "Bearer wrong", http.StatusUnauthorized},
		{"/metrics", "", http.StatusUnauthorized},
		{"/v1/queue", "Bearer s3cret", http.StatusTeapot},
		{"/healthz", "", http.StatusTeapot},
		{"/readyz", "", http.StatusTeapot},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s with %q: %d, want %d", tc.path, tc.auth, rec.Code, tc.want)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8420": true, "[::1]:8420": true, "localhost:8420": true,
		"0.0.0.0:8420": false, ":8420": false, "10.1.2.3:8420": false, "nonsense": false,
	} {
		if got := loopbackOnly(addr); got != want {
			t.Errorf("%s: %v, want %v", addr, got, want)
		}
	}
}
