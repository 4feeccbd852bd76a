package admin

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
)

// slowWorker0 is a worker 0 whose every answer takes delay, or until release is closed.
func slowWorker0(t *testing.T, delay time.Duration, release chan struct{}) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "w0.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "<p>page</p>")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// publicListener serves s's public handler with its connection bounds on a free port.
func publicListener(t *testing.T, s *fixture) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, ln := s.HTTPServer(ln)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// A request that waits for a render on miss may take page.max_wait past http.write_timeout and
// http.read_timeout; any other request is still cut at them. The answer here takes three times
// the write timeout: a connection deadline is wall-clock time, so the test lets it pass.
func TestPageWaitOutlastsTheConnectionTimeouts(t *testing.T) {
	const bound = 200 * time.Millisecond
	cfg := config.Default()
	cfg.HTTP.ReadTimeout, cfg.HTTP.WriteTimeout = config.Duration(bound), config.Duration(bound)
	cfg.Page.MaxWait = config.Duration(5 * time.Second)
	s := newFixture(t, cfg, slowWorker0(t, 3*bound, nil))
	base := publicListener(t, s)
	resp, err := http.Post(base+"/v1/pages?url=https://a.test/&wait=2s", "", nil)
	if err != nil {
		t.Fatalf("a wait past write_timeout was cut: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "<p>page</p>" {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	if resp, err := http.Get(base + "/v1/pages?url=https://a.test/"); err == nil {
		resp.Body.Close()
		t.Fatalf("a request without wait outlasted write_timeout: %d", resp.StatusCode)
	}
}

// When the pool stops, a request waiting for a render on miss is answered 503 with
// Retry-After at once; worker 0 sees its client leave.
func TestPageWaitEndsAtTheStop(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := newFixture(t, config.Default(), slowWorker0(t, time.Hour, release))
	base := publicListener(t, s)
	answer := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(base+"/v1/pages?url=https://a.test/&wait=30s", "", nil)
		if err != nil {
			t.Error(err)
		}
		answer <- resp
	}()
	select {
	case <-answer:
		t.Fatal("answered before the stop")
	case <-time.After(100 * time.Millisecond): // the request reaches worker 0; nothing depends on it
	}
	s.waits.stop()
	s.waits.stop() // twice is safe
	select {
	case resp := <-answer:
		if resp == nil {
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("%d %v, want 503 with Retry-After: 1", resp.StatusCode, resp.Header)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting request was not answered at the stop")
	}
}
