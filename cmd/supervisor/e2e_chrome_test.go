package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/wire"
)

// The chrome renderer against the real supervisor and workers: a page's declared status stored
// and sealed, a declared redirect served with its Location, and no Chromium process left behind
// when a render worker is killed with -9 or the node stops.

// needChromium skips on a machine without Chromium and fails where CI is set (.ci/run installs it).
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and Chromium is missing: %v", err)
		}
		t.Skipf("no Chromium here (%v); apt-get install chromium", err)
	}
}

// chromeProcs lists the processes of browsers started by a freshq chrome renderer (their
// profile directory), with their parent and process group.
func chromeProcs() map[int][2]int {
	out := map[int][2]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte("--user-data-dir="+filepath.Join(os.TempDir(), "freshq-chrome-"))) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if f[0] == "Z" {
			continue // a zombie is dead; it waits for its parent to reap it
		}
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		out[pid] = [2]int{ppid, pgid}
	}
	return out
}

// browserGroups are the process groups of the browsers whose main process is a child of pid.
func browserGroups(pid int) map[int]bool {
	groups := map[int]bool{}
	for p, pp := range chromeProcs() {
		if pp[0] == pid {
			groups[p] = true // the browser leads its own group
		}
	}
	return groups
}

// profileProcs are the processes, of any group or session, whose command line names a profile
// directory of the browsers of render worker pid: the browser, its helpers, and the crash
// handlers Chromium starts in sessions of their own.
func profileProcs(pid int) []int {
	want := []byte("--user-data-dir=" + filepath.Join(os.TempDir(), "freshq-chrome-"+strconv.Itoa(pid)+"-"))
	var found []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		stat, err2 := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil || err2 != nil || !bytes.Contains(cmdline, want) {
			continue
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			continue
		}
		found = append(found, p)
	}
	return found
}

func leftIn(groups map[int]bool) []int {
	var left []int
	for p, pp := range chromeProcs() {
		if groups[pp[1]] {
			left = append(left, p)
		}
	}
	return left
}

// chromeRestartAfter is the supervisor's backoff before it restarts a killed worker in the
// test; chromeDieWithin, shorter, is how long its browsers may take to die.
const (
	chromeRestartAfter = 12 * time.Second
	chromeDieWithin    = 8 * time.Second
)

func TestEndToEndChrome(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/c/missing":
			fmt.Fprint(w, `<!doctype html><html><head></head><body><script>const m = document.createElement("meta"); m.name = "prerender-status-code"; m.content = "404"; document.head.appendChild(m);</script></body></html>`)
		case "/c/moved":
			fmt.Fprint(w, `<!doctype html><html><head><meta name="prerender-status-code" content="301"><meta name="prerender-header" content="Location: /c/new"></head><body>moved</body></html>`)
		default:
			fmt.Fprint(w, `<!doctype html><p>ok</p>`)
		}
	}))
	defer origin.Close()
	dir := t.TempDir()
	n := startNode(t, dir, 2, `queue: {ready: {sweep_interval: 1s}}
supervisor: {backoff_min: `+chromeRestartAfter.String()+`, backoff_max: `+chromeRestartAfter.String()+`}
render:
  renderer: chrome
  concurrency: 2
  timeout: 20s
  domains: ["127.0.0.1"]
  chrome: {idle: 200ms}
`, "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	missing, moved := origin.URL+"/c/missing", origin.URL+"/c/moved"
	var up map[string]any
	if code := n.post("/v1/targets", []map[string]string{{"url": missing}, {"url": moved}}, &up); code != http.StatusOK {
		t.Fatalf("POST /v1/targets: %d %v", code, up)
	}
	explain := func(u string) wire.Explanation {
		var ex wire.Explanation
		a := n.do("GET", "/v1/targets?url="+url.QueryEscape(u), "", nil)
		_ = json.Unmarshal(a.body, &ex)
		return ex
	}

	defer func() {
		if t.Failed() {
			ex := explain(missing)
			t.Logf("the 404 row: failures %+v, last render %+v", ex.Failures, ex.LastRender)
		}
	}()
	// 2. The 301 the page declares is stored, and served, with its Location.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	waitFor(t, "the moved page", 30*time.Second, func() bool {
		resp, err := noFollow.Get("http://" + n.addr + "/v1/pages?url=" + url.QueryEscape(moved))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusMovedPermanently && resp.Header.Get("Location") == origin.URL+"/c/new"
	})
	// 2. The 404 it declares is the row's status, and the usual strikes (2) seal it as gone.
	waitFor(t, "the first 404", 30*time.Second, func() bool {
		ex := explain(missing)
		return ex.LastRender != nil && ex.LastRender.Status == 404
	})
	// The first strike is retried after a backoff: move past it once (a clock moved during a
	// render would outlive its lease, and its result would be fenced).
	n.advanceClock(2 * time.Hour)
	waitFor(t, "the 404 sealed as gone", 30*time.Second, func() bool {
		ex := explain(missing)
		return ex.Terminal != nil && ex.Terminal.State == "gone" && ex.Failures != nil && ex.Failures.Count == 2
	})

	// 8. kill -9 of the render worker leaves no Chromium process: every process of its
	// browsers (crash handlers included) dies on its own, before the supervisor restarts the
	// worker (supervisor.backoff_min), whose new renderer would kill what a dead worker left
	// (render/chrome's stale profiles) and so hide a browser that outlived its worker.
	// FRESHQ_TEST_CHROME_SURVIVE=1 (render/chrome.EnvSurvive) starts browsers that outlive
	// their worker: this part fails then.
	seg := n.segment()
	worker := workerPID(seg, 1)
	groups := browserGroups(worker)
	if len(groups) == 0 {
		t.Fatalf("no browser under render worker %d: %v", worker, chromeProcs())
	}
	t.Cleanup(func() { // whatever the verdict, leave no browser behind
		for _, p := range profileProcs(worker) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		stale, _ := filepath.Glob(filepath.Join(os.TempDir(), "freshq-chrome-"+strconv.Itoa(worker)+"-*"))
		for _, d := range stale {
			_ = os.RemoveAll(d)
		}
	})
	killed := time.Now()
	if err := syscall.Kill(worker, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := killed.Add(chromeDieWithin)
	for len(profileProcs(worker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := profileProcs(worker); len(left) > 0 {
		t.Fatalf("Chromium processes %v of render worker %d outlived it by %s", left, worker, chromeDieWithin)
	}
	if p := workerPID(seg, 1); p != worker && p != 0 {
		t.Fatalf("render worker restarted (%d) before the check: its renderer may have killed the browser", p)
	}
	// The supervisor restarts the worker, which starts a browser of its own and renders again.
	waitFor(t, "a restarted render worker", 30*time.Second+chromeRestartAfter, func() bool {
		p := workerPID(seg, 1)
		return p != worker && p != 0 && len(browserGroups(p)) > 0
	})
	groups = browserGroups(workerPID(seg, 1))

	// A stop (SIGTERM) closes the browser and removes its profile.
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the node did not stop")
	}
	if left := leftIn(groups); len(left) != 0 {
		t.Errorf("Chromium processes left after the stop: %v", left)
	}
	profiles, _ := filepath.Glob(filepath.Join(os.TempDir(), "freshq-chrome-*"))
	for _, p := range profiles {
		if strings.HasPrefix(filepath.Base(p), "freshq-chrome-"+strconv.Itoa(workerPID(seg, 1))+"-") {
			t.Errorf("profile %s left after the stop", p)
		}
	}
}

// A single-page app as real sites serve one, rendered through the real supervisor by one render
// worker with 4 tabs: its scripts cacheable (the long-lived browser takes them from its cache),
// its document carrying only Last-Modified (which Chromium would keep by heuristic freshness),
// its content fetched 300 ms after load. Every render stores the page with its content, none
// times out; the re-render after the cadence, and the mobile render of the same URL, fetch the
// document from the origin again, with the device's user agent; each script is fetched once.
func TestEndToEndChromeCachedSPA(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	const pages, scripts = 8, 6
	var mu sync.Mutex
	docUAs := map[string][]string{} // path → the User-Agent of each document request
	hits := map[string]int{}
	modified := time.Now().Add(-30 * 24 * time.Hour).UTC().Format(http.TimeFormat)
	var libs strings.Builder
	for i := range scripts {
		fmt.Fprintf(&libs, `<script src="/c/app/lib%d.js"></script>`, i)
	}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/c/app/lib"):
			w.Header().Set("Content-Type", "text/javascript")
			w.Header().Set("Cache-Control", "public, max-age=3600")
			fmt.Fprintf(w, "window.%s = 1;", strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/c/app/"), ".js"))
		case r.URL.Path == "/c/app/api":
			select { // the origin takes 300 ms to answer
			case <-time.After(300 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
			w.Header().Set("Cache-Control", "no-store")
			fmt.Fprint(w, "fetched content")
		default:
			mu.Lock()
			docUAs[r.URL.Path] = append(docUAs[r.URL.Path], r.UserAgent())
			version := len(docUAs[r.URL.Path])
			mu.Unlock()
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Last-Modified", modified)
			fmt.Fprintf(w, `<!doctype html><html><head>%s</head><body><p id=v>version %d</p><div id=app>loading</div><script>
addEventListener("load", () => fetch("/c/app/api").then(r => r.text()).then(t => { document.getElementById("app").textContent = t; }));
</script></body></html>`, libs.String(), version)
		}
	}))
	defer origin.Close()
	dir := t.TempDir()
	n := startNode(t, dir, 2, `queue: {ready: {sweep_interval: 1s}}
render:
  renderer: chrome
  concurrency: 4
  timeout: 30s
  domains: ["127.0.0.1"]
`, "") // a request left in flight holds its page until the timeout, however long
	waitFor(t, "ready", 30*time.Second, n.ready)
	type target struct{ url, device, ua string }
	var targets []target
	var items []map[string]string
	for i := range pages {
		targets = append(targets, target{fmt.Sprintf("%s/c/app/p%d", origin.URL, i), "desktop", config.UserAgentDefault})
	}
	targets = append(targets, target{origin.URL + "/c/app/p0", "mobile", config.MobileUserAgentDefault})
	for _, tg := range targets {
		items = append(items, map[string]string{"url": tg.url, "device": tg.device})
	}
	var up map[string]any
	if code := n.post("/v1/targets", items, &up); code != http.StatusOK {
		t.Fatalf("POST /v1/targets: %d %v", code, up)
	}
	explain := func(tg target) wire.Explanation {
		var ex wire.Explanation
		a := n.do("GET", "/v1/targets?url="+url.QueryEscape(tg.url)+"&device="+tg.device, "", nil)
		_ = json.Unmarshal(a.body, &ex)
		return ex
	}
	page := func(tg target) string {
		a := n.do("GET", "/v1/pages?url="+url.QueryEscape(tg.url)+"&device="+tg.device, "", nil)
		return string(a.body)
	}
	// rendered waits until every target has a render after since, and requires each to have
	// stored the page with its content and the document's version.
	rendered := func(round int, since time.Time) {
		t.Helper()
		waitFor(t, fmt.Sprintf("round %d of renders", round), 90*time.Second, func() bool {
			for _, tg := range targets {
				if ex := explain(tg); ex.LastRender == nil || ex.LastRender.At.Before(since) {
					return false
				}
			}
			return true
		})
		for _, tg := range targets {
			ex := explain(tg)
			body := page(tg)
			if ex.LastRender.Status != 200 || ex.Failures != nil || !strings.Contains(body, `<div id="app">fetched content</div>`) {
				t.Errorf("round %d, %s (%s): last render %+v, failures %+v, page %.200q", round, tg.url, tg.device, ex.LastRender, ex.Failures, body)
			}
		}
	}
	start := time.Now().Add(-time.Minute) // the node's clock may run ahead of the test's
	rendered(1, start)
	// The cadence (24h, the catalog route) passes: every target renders again.
	n.advanceClock(25 * time.Hour)
	rendered(2, start.Add(25*time.Hour))

	mu.Lock()
	defer mu.Unlock()
	for i := range pages {
		path := fmt.Sprintf("/c/app/p%d", i)
		want := []string{config.UserAgentDefault, config.UserAgentDefault}
		if i == 0 {
			want = append(want, config.MobileUserAgentDefault, config.MobileUserAgentDefault)
		}
		got := slices.Clone(docUAs[path])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the document was fetched by %q; want once per render, with the device's user agent: %q", path, got, want)
		}
	}
	for i := range scripts {
		if n := hits[fmt.Sprintf("/c/app/lib%d.js", i)]; n != 1 {
			t.Errorf("lib%d.js fetched %d times by the one browser, want 1 (then from its cache)", i, n)
		}
	}
}
