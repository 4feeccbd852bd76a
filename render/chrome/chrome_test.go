package chrome

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/testkit/testdns"
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

// defaultOptions are the chrome renderer's options with the default configuration's values.
func defaultOptions() Options {
	d := config.Default().Render
	block := d.Chrome.Block
	if *d.Chrome.BlockThirdParties { // as package assemble does
		block = append(block, config.ChromeThirdParties()...)
	}
	devices := map[string]Device{}
	for name := range d.DeviceNames() {
		devices[name] = Device(d.Emulation(name))
	}
	return Options{
		Options: render.Options{Renderer: "chrome", Concurrency: d.Concurrency, Timeout: d.Timeout.D(), Domains: d.Domains,
			UserAgent: d.UserAgent, UserAgents: d.UserAgents, MaxBody: int64(d.MaxBody), MaxRedirects: d.MaxRedirects},
		Path: d.Chrome.Path, Idle: d.Chrome.Idle.D(), Settle: d.Chrome.Settle.D(), LongRequest: d.Chrome.LongRequest.D(), DataWait: d.Chrome.DataWait.D(),
		CacheMaxAge: d.Chrome.CacheMaxAge.D(), BlockTypes: d.Chrome.BlockTypes,
		Block: block, KeepScripts: d.Chrome.KeepScripts, RecycleAfter: d.Chrome.RecycleAfter, MaxRSS: int64(d.Chrome.MaxRSS),
		User: d.Chrome.User, NoSandbox: d.Chrome.NoSandbox, Nice: d.Chrome.Nice, Devices: devices, DefaultDevice: config.DefaultDevice,
	}
}

func testCfg() Options {
	c := defaultOptions()
	c.Timeout = 10 * time.Second
	c.Domains = []string{"site.test"}
	c.Idle = 200 * time.Millisecond
	return c
}

// newRenderer starts a renderer for the test (site.test resolving to loopback) and closes it
// at the end.
func newRenderer(t testing.TB, mutate func(*Options)) *Renderer {
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

func render1(t *testing.T, r *Renderer, req render.Request) render.Result {
	t.Helper()
	return r.Render(context.Background(), req)
}

// 1. Readiness: content a timer adds 300 ms after load is in the page (network idle waits for
// it); a page that defines prerenderReady is captured only once it is true, well after idle.
func TestReadiness(t *testing.T) {
	s := newSite(t)
	s.page("/timer", `<!doctype html><html><body><p>a</p><script>setTimeout(() => document.body.insertAdjacentHTML("beforeend", "<p id=late>late</p>"), 300)</script></body></html>`)
	s.page("/flag", `<!doctype html><html><body><script>window.prerenderReady = false;
setTimeout(() => { document.body.insertAdjacentHTML("beforeend", "<p id=flagged>flagged</p>"); window.prerenderReady = true; }, 1500)</script></body></html>`)
	r := newRenderer(t, func(c *Options) { c.Idle = 500 * time.Millisecond })

	res := render1(t, r, render.Request{URL: s.url("/timer")})
	if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), `<p id="late">late</p>`) {
		t.Fatalf("timer page: %v %s: %s", res.Outcome, res.Err, res.Body)
	}
	if strings.Contains(string(res.Body), "<script") {
		t.Errorf("scripts kept: %s", res.Body)
	}
	res = render1(t, r, render.Request{URL: s.url("/flag")})
	if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), `<p id="flagged">flagged</p>`) {
		t.Fatalf("prerenderReady page: %v %s: %s", res.Outcome, res.Err, res.Body)
	}
	if res.Timings == nil || res.Timings.Ready < 1500*time.Millisecond {
		t.Errorf("captured before prerenderReady: timings %+v", res.Timings)
	}
}

// 2 (the renderer's half; the end-to-end test stores and seals it). A page's prerender meta
// tags, set by its script, are its status.
func TestDeclaredStatusFromScript(t *testing.T) {
	s := newSite(t)
	s.page("/missing", `<!doctype html><html><head></head><body><script>const m = document.createElement("meta"); m.name = "prerender-status-code"; m.content = "404"; document.head.appendChild(m);</script></body></html>`)
	s.page("/moved", `<!doctype html><html><head><meta name="prerender-status-code" content="301"><meta name="prerender-header" content="Location: https://example.com/new"></head><body>moved</body></html>`)
	r := newRenderer(t, nil)
	if res := render1(t, r, render.Request{URL: s.url("/missing")}); res.Outcome != outcome.NotFound || res.Status != 404 {
		t.Errorf("declared 404: %v %d %s", res.Outcome, res.Status, res.Err)
	}
	res := render1(t, r, render.Request{URL: s.url("/moved")})
	if res.Outcome != outcome.OK || res.Status != 301 || res.Headers["location"] != "https://example.com/new" {
		t.Errorf("declared 301: %v %d %v %s", res.Outcome, res.Status, res.Headers, res.Err)
	}
}

// 3. Images (a default blocked type) and a URL matching render.chrome.block are never requested;
// both are counted.
func TestBlocking(t *testing.T) {
	s := newSite(t)
	s.page("/", `<!doctype html><html><body><img src="/pic.png"><img src="/other.jpg">
<script src="/analytics/collect.js"></script><script src="/app.js"></script></body></html>`)
	s.page("/app.js", `document.body.insertAdjacentHTML("beforeend", "<p id=app>app</p>")`)
	var mu sync.Mutex
	reasons := map[string]int{}
	r := newRenderer(t, func(c *Options) { c.Block = []string{"*/analytics/*"} })
	r.hooks.Blocked = func(reason string) { mu.Lock(); reasons[reason]++; mu.Unlock() }
	res := render1(t, r, render.Request{URL: s.url("/")})
	if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), `id="app"`) {
		t.Fatalf("%v %s: %s", res.Outcome, res.Err, res.Body)
	}
	for _, p := range []string{"/pic.png", "/other.jpg", "/analytics/collect.js"} {
		if n := s.count(p); n != 0 {
			t.Errorf("%s requested %d times", p, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if reasons["type"] != 2 || reasons["pattern"] != 1 || res.Timings.Blocked != 3 {
		t.Errorf("counted %v, timings %+v; want 2 by type, 1 by pattern", reasons, res.Timings)
	}
}

// 4. A mobile render sends the mobile user agent and lays the page out at the mobile width.
func TestMobileDevice(t *testing.T) {
	s := newSite(t)
	s.page("/", `<!doctype html><html><head><meta name="viewport" content="width=device-width"></head><body><script>document.body.insertAdjacentHTML("beforeend", "<p id=w>" + window.innerWidth + "</p><p id=ua>" + navigator.userAgent + "</p>")</script></body></html>`)
	r := newRenderer(t, nil)
	for _, c := range []struct {
		device string
		width  int
		ua     string
	}{{"mobile", config.MobileWidth, config.MobileUserAgentDefault}, {"desktop", config.DesktopWidth, config.UserAgentDefault}} {
		res := render1(t, r, render.Request{URL: s.url("/"), Device: c.device})
		s.mu.Lock()
		sent := s.uas["/"]
		s.mu.Unlock()
		if sent != c.ua {
			t.Errorf("%s: sent User-Agent %q, want %q", c.device, sent, c.ua)
		}
		if want := `<p id="w">` + itoa(c.width) + `</p>`; !strings.Contains(string(res.Body), want) {
			t.Errorf("%s: want %s in %s", c.device, want, res.Body)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// 5. A page that never settles (a request that never ends) is a timeout at render.timeout, with
// no page: nothing of it can be stored.
func TestNeverSettlesTimesOut(t *testing.T) {
	s := newSite(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	s.page("/", `<!doctype html><html><body><script>setInterval(() => fetch("/poll?" + Math.random()), 100)</script></body></html>`)
	s.mux.HandleFunc("/poll", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	// The browser is started, and a tab opened, by a first render with a generous timeout, so
	// that the timeout under test is spent where the test looks: a cold start and navigation on
	// a machine busy with the race build of every package can take most of a short timeout.
	r := newRenderer(t, func(c *Options) { c.Timeout = 20 * time.Second })
	s.page("/warm", `<!doctype html><p>warm</p>`)
	if res := render1(t, r, render.Request{URL: s.url("/warm")}); res.Outcome != outcome.OK {
		t.Fatalf("the first render: %v %s", res.Outcome, res.Err)
	}
	const timeout = 4 * time.Second
	r.cfg.Timeout = timeout // no render is in flight
	start := time.Now()
	res := render1(t, r, render.Request{URL: s.url("/")})
	if res.Outcome != outcome.Timeout || res.Body != nil || res.Stage != render.StageReady {
		t.Fatalf("%v at %s (%s), body %d bytes; want a timeout while waiting for readiness, no body", res.Outcome, res.Stage, res.Err, len(res.Body))
	}
	if took := time.Since(start); took > timeout+2*time.Second {
		t.Errorf("took %s for a %s render.timeout", took, timeout)
	}
	// The browser is still good for the next render. That render gets a generous timeout of its
	// own: what is checked is that the browser survived the timeout, and the page's network-idle
	// wait alone can take most of 1.5 s on a machine busy with the race build of every package.
	// (No render is in flight here, so the renderer's configuration can change.)
	r.cfg.Timeout = 20 * time.Second
	s.page("/ok", `<!doctype html><p>ok</p>`)
	if res := render1(t, r, render.Request{URL: s.url("/ok")}); res.Outcome != outcome.OK {
		t.Errorf("after a timeout: %v %s", res.Outcome, res.Err)
	}
}

// 6. The page's scripts cannot reach the render host's network: a fetch of another loopback
// port, and of the cloud metadata address, never arrives; neither can the document redirect
// off render.domains.
func TestScriptsCannotReachInternalAddresses(t *testing.T) {
	secret := newSite(t)
	secret.page("/secret", "secret")
	s := newSite(t)
	s.page("/", `<!doctype html><html><body><p id=r>-</p><script>
Promise.allSettled([fetch("`+secret.URL+`/secret"), fetch("http://169.254.169.254/latest/meta-data/"), fetch("http://[::1]:`+strings.TrimPrefix(secret.URL, "http://127.0.0.1:")+`/secret")])
  .then(rs => { document.getElementById("r").textContent = rs.map(r => r.status).join(","); window.prerenderReady = true; });
window.prerenderReady = false;</script></body></html>`)
	s.mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://elsewhere.test/", http.StatusFound)
	})
	var mu sync.Mutex
	policy := 0
	r := newRenderer(t, nil)
	r.hooks.Blocked = func(reason string) {
		mu.Lock()
		if reason == "policy" {
			policy++
		}
		mu.Unlock()
	}
	res := render1(t, r, render.Request{URL: s.url("/")})
	if res.Outcome != outcome.OK {
		t.Fatalf("%v %s", res.Outcome, res.Err)
	}
	if n := secret.count("/secret"); n != 0 {
		t.Errorf("the secret was fetched %d times", n)
	}
	if !strings.Contains(string(res.Body), `<p id="r">rejected,rejected,rejected</p>`) && !strings.Contains(string(res.Body), `<p id="r">403,403,`) {
		t.Logf("page says %s", res.Body)
	}
	mu.Lock()
	if policy < 3 {
		t.Errorf("%d requests refused by the policy, want 3", policy)
	}
	mu.Unlock()
	res = render1(t, r, render.Request{URL: s.url("/away")})
	if res.Outcome != outcome.Blocked || res.Stage != render.StagePolicy {
		t.Errorf("redirect off render.domains: %v at %s (%s)", res.Outcome, res.Stage, res.Err)
	}
	res = render1(t, r, render.Request{URL: "file:///etc/passwd"})
	if res.Outcome != outcome.Failed || res.Body != nil {
		t.Errorf("file URL: %v %s", res.Outcome, res.Err)
	}
}

// 7. A crashed tab fails its own render only, and a crashed browser is restarted for the next.
func TestCrashes(t *testing.T) {
	s := newSite(t)
	s.page("/hang", `<!doctype html><html><body><script>window.prerenderReady = false;</script></body></html>`)
	s.page("/ok", `<!doctype html><p>ok</p>`)
	r := newRenderer(t, nil)
	for _, kind := range []string{"renderer", "browser"} {
		done := make(chan render.Result, 1)
		go func() { done <- render1(t, r, render.Request{URL: s.url("/hang")}) }()
		waitFor(t, func() bool { return s.count("/hang") > 0 })
		r.mu.Lock()
		b := r.cur
		r.mu.Unlock()
		if kind == "renderer" {
			if n := killProcs(b.dir, "--type=renderer"); n == 0 {
				t.Fatal("no renderer process to kill")
			}
		} else {
			_ = syscall.Kill(b.pgid, syscall.SIGKILL)
		}
		res := <-done
		t.Logf("%s killed: %v at %s after %s (%s)", kind, res.Outcome, res.Stage, res.Duration, res.Err)
		if res.Outcome != outcome.Failed || res.Stage != render.StageBrowser {
			t.Errorf("%s killed: %v at %s (%s); want failed at browser", kind, res.Outcome, res.Stage, res.Err)
		}
		if res := render1(t, r, render.Request{URL: s.url("/ok")}); res.Outcome != outcome.OK {
			t.Errorf("after the %s crash: %v %s", kind, res.Outcome, res.Err)
		}
	}
	if r.Restarts() != 1 {
		t.Errorf("%d restarts, want 1 (the browser's crash)", r.Restarts())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30s")
		}
	}
}

// killProcs kills the processes of the browser with profile dir whose command line holds arg.
func killProcs(dir, arg string) int {
	n := 0
	forEachProc(func(pid int) {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte("--user-data-dir="+dir)) && bytes.Contains(cmdline, []byte(arg)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	})
	return n
}

// A browser keeps its tabs between renders (opening one costs more than a trivial render): a
// tab is parked on about:blank after its render, the next render takes it, and no more tabs
// are ever open than renders ran at once. A parked tab whose renderer process died while it
// waited is not given to a render: the render takes a new one.
func TestTabsAreReusedAndParked(t *testing.T) {
	s := newSite(t)
	s.page("/a", `<!doctype html><p>a</p><script>window.leftOver = setInterval(() => fetch("/late"), 50); window.prerenderReady = true</script>`)
	s.page("/late", "")
	s.page("/ok", `<!doctype html><p>ok</p>`)
	r := newRenderer(t, nil)
	for range 5 {
		if res := render1(t, r, render.Request{URL: s.url("/a")}); res.Outcome != outcome.OK {
			t.Fatalf("%v %s", res.Outcome, res.Err)
		}
	}
	r.mu.Lock()
	b := r.cur
	idle := len(b.idle)
	r.mu.Unlock()
	if idle != 1 {
		t.Fatalf("%d idle tabs after 5 renders one at a time, want 1", idle)
	}
	// The tab's own document is asked, not the browser's list of targets: that list learns of
	// the commit after the tab does, and under load has shown "" for a tab already parked.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shown, err := chromedp.Evaluate[string]("location.href")(ctx, b.idle[0].target)
	if err != nil {
		t.Fatal(err)
	}
	if shown != "about:blank" {
		t.Errorf("the idle tab shows %q, want about:blank (parked: its page stopped)", shown)
	}
	if n := killProcs(b.dir, "--type=renderer"); n == 0 {
		t.Fatal("no renderer process to kill")
	}
	waitFor(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(b.idle) == 0 || b.idle[0].dead.Load()
	})
	if res := render1(t, r, render.Request{URL: s.url("/ok")}); res.Outcome != outcome.OK {
		t.Errorf("after the idle tab's renderer died: %v at %s (%s)", res.Outcome, res.Stage, res.Err)
	}
}

// The browser is retired for a new one after render.chrome.recycle_after renders, and when the
// Pss of its processes passes render.chrome.max_rss (looked at off the render's path); the
// renders go on, on the new browser, and the old one is gone with its profile.
func TestRecycling(t *testing.T) {
	s := newSite(t)
	s.page("/ok", `<!doctype html><p>ok</p>`)
	var mu sync.Mutex
	reasons := map[string]int{}
	restarted := func(reason string) {
		mu.Lock()
		reasons[reason]++
		mu.Unlock()
	}
	count := func(reason string) int {
		mu.Lock()
		defer mu.Unlock()
		return reasons[reason]
	}
	r := newRenderer(t, func(c *Options) { c.RecycleAfter = 2 })
	r.hooks.Restarted = restarted
	var dirs []string
	for i := range 4 {
		r.mu.Lock()
		if r.cur != nil {
			dirs = append(dirs, r.cur.dir)
		}
		r.mu.Unlock()
		if res := render1(t, r, render.Request{URL: s.url("/ok")}); res.Outcome != outcome.OK {
			t.Fatalf("render %d: %v %s", i, res.Outcome, res.Err)
		}
	}
	if n := count("recycle"); n != 2 {
		t.Errorf("%d recycles after 4 renders with recycle_after 2, want 2", n)
	}
	waitFor(t, func() bool { _, err := os.Stat(dirs[0]); return os.IsNotExist(err) })

	big := newRenderer(t, func(c *Options) { c.MaxRSS = 1 })
	big.hooks.Restarted = restarted
	if res := render1(t, big, render.Request{URL: s.url("/ok")}); res.Outcome != outcome.OK {
		t.Fatalf("%v %s", res.Outcome, res.Err)
	}
	waitFor(t, func() bool { return count("rss") == 1 })
	if res := render1(t, big, render.Request{URL: s.url("/ok")}); res.Outcome != outcome.OK {
		t.Errorf("after the rss recycle: %v %s", res.Outcome, res.Err)
	}
}
