package render

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A conditional GET sends the validators and tells a 304 from anything else; a host outside
// render.domains is not asked.
func TestCheckerNotModified(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` || r.Header.Get("If-Modified-Since") == "Tue, 01 Dec 2026 10:00:00 GMT" {
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write([]byte("<p>changed</p>"))
	}))
	defer srv.Close()
	cfg := testConfig("http")
	cfg.Domains = []string{"127.0.0.1"}
	c := NewChecker(cfg)
	ctx := context.Background()
	if r, err := c.NotModified(ctx, srv.URL+"/p", "desktop", `"v1"`, ""); err != nil || !r.NotModified || r.Headers["etag"] != `"v1"` {
		t.Fatalf("etag: %+v %v", r, err)
	}
	if r, err := c.NotModified(ctx, srv.URL+"/p", "desktop", "", "Tue, 01 Dec 2026 10:00:00 GMT"); err != nil || !r.NotModified {
		t.Fatalf("last-modified: %+v %v", r, err)
	}
	if r, err := c.NotModified(ctx, srv.URL+"/p", "desktop", `"v0"`, ""); err != nil || r.NotModified || r.Status != 200 {
		t.Fatalf("changed: %+v %v", r, err)
	}
	if _, err := c.NotModified(ctx, srv.URL+"/p", "desktop", "", ""); err == nil {
		t.Fatal("a check without validators")
	}
	cfg.Domains = []string{"example.com"}
	if _, err := NewChecker(cfg).NotModified(ctx, srv.URL+"/p", "desktop", `"v1"`, ""); err == nil {
		t.Fatal("a host outside render.domains was asked")
	}
}
