package admin

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freshq/freshq/config"
)

func TestBearerTokenGuardsEverythingButHealth(t *testing.T) {
	cfg := config.Default()
	cfg.Token = "s3cret"
	s := newFixture(t, cfg, "")
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
		if got := LoopbackOnly(addr); got != want {
			t.Errorf("%s: %v, want %v", addr, got, want)
		}
	}
}

func TestHostAllowed(t *testing.T) {
	hosts := []string{"freshq.internal", "Render.Example.COM."}
	for _, tc := range []struct {
		listen, host string
		want         bool
	}{
		{"127.0.0.1:8420", "127.0.0.1:8420", true},
		{"127.0.0.1:8420", "127.0.0.1", true},
		{"127.0.0.1:8420", "127.0.0.1:9000", true}, // a port forward may change the port
		{"127.0.0.1:8420", "localhost:8420", true},
		{"127.0.0.1:8420", "LOCALHOST.:8420", true},
		{"127.0.0.1:8420", "[::1]:8420", true}, // loopback for loopback
		{"127.0.0.1:8420", "127.0.0.2:8420", true},
		{"127.0.0.1:8420", "", true}, // HTTP/1.0 without Host: not a browser
		{"127.0.0.1:8420", "evil.example:8420", false},
		{"127.0.0.1:8420", "127.0.0.1.nip.io:8420", false},
		{"127.0.0.1:8420", "localhost.evil.example", false},
		{"127.0.0.1:8420", "10.0.0.5:8420", false},
		{"127.0.0.1:8420", "freshq.internal:8420", true},
		{"127.0.0.1:8420", "render.example.com", true},
		{"127.0.0.1:8420", "www.freshq.internal", false}, // exact names only
		{"[::1]:8420", "[::1]:8420", true},
		{"[::1]:8420", "127.0.0.1:8420", true},
		{"localhost:8420", "127.0.0.1:8420", true},
		{"localhost:8420", "10.0.0.5:8420", false},
		{"10.0.0.5:8420", "10.0.0.5:8420", true},
		{"10.0.0.5:8420", "127.0.0.1:8420", false},
		{"10.0.0.5:8420", "10.0.0.6:8420", false},
		{"0.0.0.0:8420", "10.0.0.6:8420", true}, // on every interface: any address may be ours
		{":8420", "[2001:db8::1]:8420", true},
		{":8420", "evil.example", false},
		{"myhost:8420", "MyHost:8420", true},
		{"myhost:8420", "evil.example:8420", false},
	} {
		if got := hostAllowed(tc.listen, hosts, tc.host); got != tc.want {
			t.Errorf("listen %s, Host %q: %v, want %v", tc.listen, tc.host, got, tc.want)
		}
	}
}

// The guards in front of the API: Host first, then the cross-origin check on writes; each
// refusal is a JSON error naming the header, and what programs send passes.
func TestPublicGuards(t *testing.T) {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:8420"
	s := newFixture(t, cfg, "")
	reached := 0
	h := s.hostGuard(crossOrigin(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached++
		w.WriteHeader(http.StatusTeapot)
	})))
	for _, tc := range []struct {
		name, method, path, host string
		header                   map[string]string
		want                     int
		field                    string
	}{
		{"curl default", "POST", "/v1/targets", "127.0.0.1:8420", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusTeapot, ""},
		{"freshqctl", "POST", "/v1/targets", "127.0.0.1:8420", map[string]string{"Content-Type": "application/x-ndjson", "User-Agent": "freshqctl"}, http.StatusTeapot, ""},
		{"cross-site text/plain", "POST", "/v1/results", "127.0.0.1:8420", map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "Sec-Fetch-Site"},
		{"same-site is not same-origin", "POST", "/v1/targets", "127.0.0.1:8420", map[string]string{"Origin": "http://127.0.0.1:9999", "Sec-Fetch-Site": "same-site"}, http.StatusForbidden, "Sec-Fetch-Site"},
		{"old browser, Origin only", "DELETE", "/v1/targets", "127.0.0.1:8420", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, "Origin"},
		{"null Origin (sandboxed page)", "POST", "/v1/prioritize", "127.0.0.1:8420", map[string]string{"Origin": "null"}, http.StatusForbidden, "Origin"},
		{"same origin", "POST", "/v1/targets", "127.0.0.1:8420", map[string]string{"Origin": "http://127.0.0.1:8420", "Sec-Fetch-Site": "same-origin"}, http.StatusTeapot, ""},
		{"typed in the address bar", "POST", "/v1/targets", "127.0.0.1:8420", map[string]string{"Sec-Fetch-Site": "none"}, http.StatusTeapot, ""},
		{"cross-site read", "GET", "/v1/queue", "127.0.0.1:8420", map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusTeapot, ""},
		{"rebinding read", "GET", "/v1/queue", "evil.example:8420", nil, http.StatusMisdirectedRequest, "Host"},
		{"rebinding write, same-origin to the browser", "POST", "/v1/targets", "evil.example:8420", map[string]string{"Origin": "http://evil.example:8420", "Sec-Fetch-Site": "same-origin"}, http.StatusMisdirectedRequest, "Host"},
		{"probe with any Host", "GET", "/readyz", "10.1.2.3:8420", nil, http.StatusTeapot, ""},
	} {
		reached = 0
		req := httptest.NewRequest(tc.method, "http://"+tc.host+tc.path, strings.NewReader(`[]`))
		req.Host = tc.host
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d, want %d (%s)", tc.name, rec.Code, tc.want, rec.Body)
			continue
		}
		if tc.want == http.StatusTeapot {
			continue
		}
		var e struct{ Error, Field string }
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Field != tc.field || e.Error == "" || reached != 0 {
			t.Errorf("%s: %s (reached %d), want a JSON error naming %s", tc.name, rec.Body, reached, tc.field)
		}
	}
}

// TestInternalPathsAreNotProxied: worker 0's internal endpoints (result batches, the index
// claim, profiles) are for the render workers on the 0600 socket only. The public listener
// never forwards them, however the path is spelled: ServeMux cleans it first (a redirect to the
// clean path, which the guard then refuses).
func TestInternalPathsAreNotProxied(t *testing.T) {
	proxied := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	mux := http.NewServeMux()
	mux.Handle("/", internalGuard(proxied))
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/internal/results", http.StatusNotFound},
		{"/internal/claim", http.StatusNotFound},
		{"/internal/debug/pprof/profile", http.StatusNotFound},
		{"/v1/../internal/claim", http.StatusTemporaryRedirect},
		{"//internal/claim", http.StatusTemporaryRedirect},
		{"/v1/queue", http.StatusTeapot},
		{"/internalized", http.StatusTeapot},
	} {
		req := httptest.NewRequest(http.MethodPost, "http://x"+tc.path, nil)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d, want %d", tc.path, rec.Code, tc.want)
		}
		if loc := rec.Header().Get("Location"); rec.Code == http.StatusTemporaryRedirect && !strings.HasPrefix(loc, "/internal/") {
			t.Errorf("%s: redirected to %q, not to the clean internal path", tc.path, loc)
		}
	}
}

// fakeWorker0 serves every request on a unix socket with 200, as a worker 0 would that grants
// whatever it is asked; it returns the socket's path.
func fakeWorker0(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "w0.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jobs": []}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// Once the pool stops, a remote renderer gets no new lease: POST /v1/claim is a 503 with
// Retry-After and a JSON error, while the endpoints that end leases (results, extend, release)
// stay open, so that a remote's renders in flight still land or go back.
func TestRemoteClaimsRefusedWhileStopping(t *testing.T) {
	cfg := config.Default()
	s := newFixture(t, cfg, fakeWorker0(t))
	h := s.Handler()
	post := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8420"+path, strings.NewReader(`{}`))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	paths := []string{"/v1/claim", "/v1/results", "/v1/leases/extend", "/v1/leases/release"}
	for _, p := range paths {
		if rec := post(p); rec.Code != http.StatusOK {
			t.Fatalf("%s before the stop: %d %s", p, rec.Code, rec.Body)
		}
	}
	s.stopping.Store(true)
	rec := post("/v1/claim")
	var e struct{ Error string }
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
		json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == "" {
		t.Fatalf("a claim while stopping: %d %v %s, want 503 with Retry-After and a JSON error", rec.Code, rec.Header(), rec.Body)
	}
	for _, p := range paths[1:] {
		if rec := post(p); rec.Code != http.StatusOK {
			t.Fatalf("%s while stopping: %d %s, want it still served", p, rec.Code, rec.Body)
		}
	}
}
