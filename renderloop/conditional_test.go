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
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/shm"
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

// countingRenderer is a renderer that is not a ConditionalRenderer (as chrome is not): it
// counts its renders and answers each with an ok page.
type countingRenderer struct{ renders atomic.Int64 }

func (r *countingRenderer) Render(context.Context, render.Request) render.Result {
	r.renders.Add(1)
	return render.Result{Outcome: outcome.OK, Status: http.StatusOK, Body: []byte("<!doctype html><title>p</title>")}
}

// A check before another renderer's render that the origin answered 304 is a render attempt
// with outcome ok, counted as the http renderer's 304 is (freshq_render_total): without it a
// farm rendering with Chromium reported fewer attempts than it made, and none for the pages
// its checks found unchanged.
func TestConditionalCheckCountsItsAttempt(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, "<!doctype html><title>p</title>")
	}))
	t.Cleanup(origin.Close)
	e := testEnv(t)
	cfg := config.Default()
	cfg.Render.Domains = []string{"127.0.0.1"}
	if err := setConfig(e, cfg); err != nil {
		t.Fatal(err)
	}
	rdr := &countingRenderer{}
	c := &conditionalCheck{client: validatorsSocket(t, `"v1"`)}
	okCounter := shm.CounterRenderOutcome + shm.Counter(outcome.OK-1)
	before := e.Worker.Load(okCounter)
	res, ok := c.renderJob(context.Background(), e, rdr, claim.Job{Key: []byte("desktop|" + origin.URL + "/p"), Checkable: true})
	if !ok || res.Status != http.StatusNotModified {
		t.Fatalf("checked page: ok %v status %d, want a 304 result", ok, res.Status)
	}
	if n := rdr.renders.Load(); n != 0 {
		t.Fatalf("a page the origin answered 304 was rendered %d times, want 0", n)
	}
	if got := e.Worker.Load(okCounter) - before; got != 1 {
		t.Fatalf("a check answered 304 counted %d ok render attempts, want 1, as the http renderer's 304", got)
	}
}
