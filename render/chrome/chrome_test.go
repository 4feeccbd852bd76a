package chrome

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/internal/testdns"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// needChromium skips a test on a machine without Chromium, and fails it where CI is set: CI
// installs Chromium (.ci/run), and a test that needs the browser must not pass there by skipping.
func needChromium(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath(config.ChromePathDefault)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and Chromium is missing: %v", err)
		}
		t.Skipf("no Chromium here (%v); apt-get install chromium", err)
	}
	return path
}

// site is a test origin on loopback, reached by the browser as http://site.test:<port>: the
// name is listed in render.domains exactly, so the address policy lets it reach loopback, while
// a bare 127.0.0.1 (another port, a script's fetch) is internal and not listed.
type site struct {
	*httptest.Server
	mux  *http.ServeMux
	mu   sync.Mutex
	hits map[string]int
	uas  map[string]string
}

func newSite(t testing.TB) *site {
	t.Helper()
	s := &site{mux: http.NewServeMux(), hits: map[string]int{}, uas: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.uas[r.URL.Path] = r.UserAgent()
		s.mu.Unlock()
		s.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) url(path string) string {
	return "http://site.test:" + strings.TrimPrefix(s.URL, "http://127.0.0.1:") + path
}

func (s *site) page(path, html string) {
	s.mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(html))
	})
}

func (s *site) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func testCfg() config.Render {
	c := config.Default().Render
	c.Renderer = "chrome"
	c.Timeout = config.Duration(10 * time.Second)
	c.Domains = []string{"site.test"}
	c.Chrome.Idle = config.Duration(200 * time.Millisecond)
	return c
}

// newRenderer starts a renderer for the test (site.test resolving to loopback) and closes it
// at the end.
func newRenderer(t testing.TB, mutate func(*config.Render)) *Renderer {
	t.Helper()
	needChromium(t)
	testdns.Use(t, map[string][]netip.Addr{"site.test": {netip.MustParseAddr("127.0.0.1")}})
	cfg := testCfg()
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := New(cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestSmoke(t *testing.T) {
	s := newSite(t)
	s.page("/", `<!doctype html><html><head><title>t</title></head><body><p>hello</p><script>document.body.insertAdjacentHTML("beforeend","<p id=js>from js</p>")</script></body></html>`)
	r := newRenderer(t, nil)
	res := r.Render(context.Background(), render.Request{URL: s.url("/")})
	t.Logf("%+v %s", res, res.Body)
	if res.Outcome != outcome.OK {
		t.Fatal(res.Err)
	}
}
