package renderloop

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/wire"
)

// validatorsSocket is worker 0's validators endpoint as a test sets it: every page may be
// checked, with etag.
func validatorsSocket(t *testing.T, etag string) *wire.Client {
	return validatorsServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"check": true, "etag": %q}`, etag)
	})
}

// validatorsServer serves worker 0's validators endpoint with answer on a unix socket, and
// returns a client of it.
func validatorsServer(t *testing.T, answer http.HandlerFunc) *wire.Client {
	t.Helper()
	dir, err := os.MkdirTemp("", "cc") // a unix socket's path is bounded to about a hundred bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "w0.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.PathValidators, answer)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return wire.NewClient(sock)
}

// With the http renderer, a checkable page whose origin answers the conditional GET with the
// changed page is rendered from that answer: the origin serves it once. (A check followed by
// a render fetched every changed page twice, and counted it twice.) A 304 is the result as
// before.
func TestConditionalHTTPRenderFetchesAChangedPageOnce(t *testing.T) {
	var full, conditional atomic.Int64
	current := `"v2"`
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", current)
		if inm := r.Header.Get("If-None-Match"); inm != "" {
			conditional.Add(1)
			if inm == current {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		full.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>p</title><h1>changed</h1>")
	}))
	t.Cleanup(origin.Close)
	rdr, err := render.NewHTTP(render.Options{Timeout: 10 * time.Second, MaxBody: 1 << 20, Domains: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdr.CloseIdleConnections)

	e := testEnv(t)
	cfg := config.Default() // what a checker would be built from, had the render not been the check
	cfg.Render.Domains = []string{"127.0.0.1"}
	if err := setConfig(e, cfg); err != nil {
		t.Fatal(err)
	}
	c := &conditionalCheck{client: validatorsSocket(t, `"v1"`)}
	key := []byte("desktop|" + origin.URL + "/p")
	res, ok := c.renderJob(context.Background(), e, rdr, claim.Job{Key: key, Checkable: true})
	if !ok {
		t.Fatal("a checkable page with the http renderer was not rendered by its conditional request")
	}
	if res.Status != http.StatusOK || string(res.Body) != "<!doctype html><title>p</title><h1>changed</h1>" {
		t.Fatalf("result: status %d body %q, want the changed page", res.Status, res.Body)
	}
	if f, c := full.Load(), conditional.Load(); f != 1 || c != 1 {
		t.Fatalf("the origin answered %d full GETs and saw %d conditional ones, want 1 and 1", f, c)
	}

	current = `"v1"`
	res, ok = c.renderJob(context.Background(), e, rdr, claim.Job{Key: key, Checkable: true})
	if !ok || res.Status != http.StatusNotModified || len(res.Body) != 0 || res.Headers["etag"] != `"v1"` {
		t.Fatalf("unchanged page: ok %v status %d body %d bytes headers %v; want a 304 result", ok, res.Status, len(res.Body), res.Headers)
	}
	if f := full.Load(); f != 1 {
		t.Fatalf("an unchanged page cost a full GET (%d in all)", f)
	}
}
