package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
)

// BenchmarkRenderFarm renders the same pages with freshq's chrome renderer and with the
// prerender server (npm prerender, pinned in testdata/bench-render, its resource-blocking and
// script-removing plugins on, pointed at the same Debian Chromium), in one run on this machine,
// each at a sweep of concurrencies and freshq also at its defaults, and prints one table:
// good pages (their content checked, never assumed), wall time, CPU seconds over every process
// of each (browser included), the peak of those processes' memory (Pss), timeouts. It ends with the two
// ratios scripts/bench-render.sh prints.
//
// The pages (benchSite) are what a prerender cache renders: a React SPA whose product list and
// product pages take their data from a JSON API answering in 300 ms, a Vue SPA on the same API,
// a server-rendered page with many images and two web fonts, a page that sets prerenderReady,
// and a page that keeps a long-poll open. Each run renders distinct URLs (a run number in the
// query), so no run is served from another's cache of documents; scripts stay cached in a
// long-lived browser, as in production, for both.
//
// Sized by FRESHQ_BENCH_PAGES (pages of each kind, default 8) and FRESHQ_BENCH_CONCURRENCY
// (default "2 4 8 16"). freshq runs with its defaults (three processes: worker 0 and two render
// workers, render.concurrency unset, so derived from the cores: defaultsInFlight) but for
// render.domains and render.hosts.max_concurrency: every page is on one site, whose default
// limit of 4 renders at once is politeness towards a site, not a property of the farm; it is set
// to the concurrency measured. At a concurrency c of the sweep each render worker has
// render.concurrency ⌈c/2⌉.
func BenchmarkRenderFarm(b *testing.B) {
	for _, tool := range []string{"chromium", "node", "npm"} {
		needTool(b, tool)
	}
	perKind := benchEnvInt(b, "FRESHQ_BENCH_PAGES", 8)
	var conc []int
	for _, f := range strings.Fields(cmpEnv("FRESHQ_BENCH_CONCURRENCY", "2 4 8 16")) {
		c, err := strconv.Atoi(f)
		if err != nil || c < 1 {
			b.Fatalf("FRESHQ_BENCH_CONCURRENCY: %q is not a concurrency", f)
		}
		conc = append(conc, c)
	}
	deps := npmCI(b, "bench-render")
	site := newBenchSite(b, deps)
	run := 0
	urls := func() []farmPage {
		run++
		return site.pages(run, perKind)
	}
	var rows []farmRun
	for _, c := range conc {
		rows = append(rows, runPrerender(b, deps, site, urls(), c))
	}
	for _, c := range conc {
		rows = append(rows, runFreshq(b, site, urls(), c, false))
	}
	rows = append(rows, runFreshq(b, site, urls(), defaultsInFlight(b), true))

	fmt.Println("| server | concurrency | good pages | wall s | good pages/s | CPU s | good pages per CPU s | peak Pss MiB | Pss MiB per page in flight | timeouts |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r.row())
	}
	var bestPrerender, defaults farmRun
	for _, r := range rows {
		if r.server == "prerender" && r.rate() > bestPrerender.rate() {
			bestPrerender = r
		}
		if r.defaults {
			defaults = r
		}
	}
	equal := func(c int, server string) farmRun {
		for _, r := range rows {
			if r.server == server && r.concurrency == c && !r.defaults {
				return r
			}
		}
		return farmRun{}
	}
	fmt.Printf("prerender at its best concurrency: %d; freshq at its defaults: %d pages in flight\n", bestPrerender.concurrency, defaults.concurrency)
	for _, c := range conc {
		f, p := equal(c, "freshq"), equal(c, "prerender")
		if p.perCPU() > 0 && p.rate() > 0 {
			fmt.Printf("at equal concurrency %d: good pages/s freshq/prerender %.2f, good pages per CPU s %.2f\n", c, f.rate()/p.rate(), f.perCPU()/p.perCPU())
		}
	}
	if bestPrerender.perCPU() > 0 {
		fmt.Printf("ratio good-pages-per-cpu-second freshq/prerender: %.2f\n", defaults.perCPU()/bestPrerender.perCPU())
		fmt.Printf("ratio good-pages-per-second-at-best-concurrency freshq/prerender: %.2f\n", defaults.rate()/bestPrerender.rate())
	}
}

func cmpEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func benchEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// farmPage is one page of a run and the text its good render has.
type farmPage struct {
	url, want string
}

// benchSite serves the benchmark's pages and the libraries they load.
type benchSite struct {
	*httptest.Server
	kinds []string
}

const benchAPIDelay = 300 * time.Millisecond

func newBenchSite(b *testing.B, deps string) *benchSite {
	b.Helper()
	lib := func(rel string) []byte {
		data, err := os.ReadFile(filepath.Join(deps, "node_modules", rel))
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	files := map[string][]byte{
		"/static/react.js":     lib("react/umd/react.production.min.js"),
		"/static/react-dom.js": lib("react-dom/umd/react-dom.production.min.js"),
		"/static/vue.js":       lib("vue/dist/vue.global.prod.js"),
		"/static/react-app.js": []byte(benchReactApp),
		"/static/vue-app.js":   []byte(benchVueApp),
	}
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")
	wait := func(r *http.Request, d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	s := &benchSite{kinds: []string{"react-list", "react-product", "vue", "ssr", "ready", "longpoll"}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if data, ok := files[p]; ok {
			w.Header().Set("Content-Type", "text/javascript")
			w.Header().Set("Cache-Control", "public, max-age=86400")
			w.Write(data)
			return
		}
		switch {
		case strings.HasPrefix(p, "/api/list/"):
			if !wait(r, benchAPIDelay) {
				return
			}
			id := strings.TrimPrefix(p, "/api/list/")
			var items []map[string]string
			for k := range 10 {
				items = append(items, map[string]string{"name": fmt.Sprintf("Product %s.%d", id, k)})
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(items)
		case strings.HasPrefix(p, "/api/product/"):
			if !wait(r, benchAPIDelay) {
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{"name": "Product " + strings.TrimPrefix(p, "/api/product/"), "price": "12.50"})
		case p == "/api/poll":
			wait(r, 60*time.Second) // held until the page goes away
		case strings.HasPrefix(p, "/img/"):
			if !wait(r, 50*time.Millisecond) {
				return
			}
			w.Header().Set("Content-Type", "image/png")
			w.Write(png)
		case strings.HasPrefix(p, "/font/"):
			if !wait(r, 100*time.Millisecond) {
				return
			}
			w.Header().Set("Content-Type", "font/woff2")
			w.Write(bytes.Repeat([]byte{0}, 30<<10))
		default:
			kind, id, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/p/")
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, benchDocument(kind, id))
		}
	}))
	b.Cleanup(s.Close)
	return s
}

// pages are run's pages: perKind of each kind, with the text a good render of each has.
func (s *benchSite) pages(run, perKind int) []farmPage {
	var out []farmPage
	for i := range perKind {
		id := fmt.Sprintf("%d-%d", run, i)
		for _, k := range s.kinds {
			want := "Product " + id
			if k == "react-list" {
				want = "Product " + id + ".9"
			}
			out = append(out, farmPage{url: fmt.Sprintf("%s/%s/p/%s", s.URL, k, id), want: want})
		}
	}
	return out
}

func benchDocument(kind, id string) string {
	head := `<!doctype html><html><head><meta charset="utf-8"><title>` + kind + ` ` + id + `</title>`
	switch kind {
	case "react-list", "react-product":
		return head + `<script src="/static/react.js"></script><script src="/static/react-dom.js"></script></head>
<body><div id="root">Loading…</div><script>window.PAGE = {kind: "` + kind + `", id: "` + id + `"};</script><script src="/static/react-app.js"></script></body></html>`
	case "vue":
		return head + `<script src="/static/vue.js"></script></head>
<body><div id="app">Loading…</div><script>window.PAGE = {id: "` + id + `"};</script><script src="/static/vue-app.js"></script></body></html>`
	case "ssr":
		var imgs strings.Builder
		for k := range 24 {
			fmt.Fprintf(&imgs, `<img src="/img/%s-%d.png" width="1" height="1" alt="">`, id, k)
		}
		return head + `<style>@font-face{font-family:A;src:url(/font/a.woff2)}@font-face{font-family:B;src:url(/font/b.woff2)}
body{font-family:A,B,sans-serif}</style></head><body><h1>Product ` + id + `</h1><p>` +
			strings.Repeat("A server-rendered description of the product. ", 40) + `</p>` + imgs.String() + `</body></html>`
	case "ready":
		return head + `</head><body><div id="app">Loading…</div><script>
window.prerenderReady = false;
fetch("/api/product/` + id + `").then(r => r.json()).then(p => {
  document.getElementById("app").innerHTML = "<h1>" + p.name + "</h1><p>" + p.price + "</p>";
  window.prerenderReady = true;
});
</script></body></html>`
	case "longpoll":
		return head + `</head><body><h1>Product ` + id + `</h1><p>In stock.</p><script>
(function poll() { fetch("/api/poll").then(poll, function () { setTimeout(poll, 1000); }); })();
</script></body></html>`
	}
	return head + `</head><body>unknown kind</body></html>`
}

const benchReactApp = `(function () {
  var h = React.createElement, page = window.PAGE;
  function App() {
    var s = React.useState(null), data = s[0], set = s[1];
    React.useEffect(function () {
      var u = page.kind === "react-list" ? "/api/list/" + page.id : "/api/product/" + page.id;
      fetch(u).then(function (r) { return r.json(); }).then(set);
    }, []);
    if (!data) return h("p", null, "Loading…");
    if (page.kind === "react-list")
      return h("ul", null, data.map(function (p) { return h("li", { key: p.name }, p.name); }));
    return h("div", null, h("h1", null, data.name), h("p", null, data.price));
  }
  ReactDOM.createRoot(document.getElementById("root")).render(h(App));
})();`

const benchVueApp = `(function () {
  Vue.createApp({
    data: function () { return { p: null }; },
    mounted: function () {
      var self = this;
      fetch("/api/product/" + window.PAGE.id).then(function (r) { return r.json(); }).then(function (p) { self.p = p; });
    },
    template: '<div><p v-if="!p">Loading…</p><div v-else><h1>{{ p.name }}</h1><p>{{ p.price }}</p></div></div>'
  }).mount("#app");
})();`

// farmRun is one row of the table.
type farmRun struct {
	server           string
	concurrency      int
	defaults         bool
	pages, good      int
	wall             time.Duration
	cpu              float64 // seconds, every process of the server
	peakRSS          int64   // bytes, the sum over its processes at the worst sample
	timeouts         int
	firstBad, badGot string
}

func (r farmRun) rate() float64 {
	if r.wall <= 0 {
		return 0
	}
	return float64(r.good) / r.wall.Seconds()
}

func (r farmRun) perCPU() float64 {
	if r.cpu <= 0 {
		return 0
	}
	return float64(r.good) / r.cpu
}

func (r farmRun) row() string {
	name := r.server
	if r.defaults {
		name += " (defaults)"
	}
	line := fmt.Sprintf("| %s | %d | %d/%d | %.1f | %.2f | %.1f | %.2f | %.0f | %.0f | %d |", name, r.concurrency, r.good, r.pages,
		r.wall.Seconds(), r.rate(), r.cpu, r.perCPU(), float64(r.peakRSS)/(1<<20), float64(r.peakRSS)/(1<<20)/float64(r.concurrency), r.timeouts)
	if r.firstBad != "" {
		line += fmt.Sprintf("\n(%s: first page without its content: %s, which had: %.120q)", name, r.firstBad, r.badGot)
	}
	return line
}

// treeSampler samples the processes under root (root included) from /proc: their CPU time since
// the sampler began (a process that began later counts from 0) and the worst sum of their
// proportional set sizes (Pss: a browser's processes share most of their pages, so a sum of
// their RSS would count the shared ones once a process). A process born and gone between two
// samples is missed; the samples are 50 ms apart (memory every 500 ms), and a browser's
// processes live for many renders.
type treeSampler struct {
	root    int
	mu      sync.Mutex
	base    map[int]uint64 // CPU ticks of each process when first seen
	last    map[int]uint64
	peakRSS int64
	samples int
	stop    chan struct{}
	done    chan struct{}
}

func sampleTree(root int) *treeSampler {
	t := &treeSampler{root: root, base: map[int]uint64{}, last: map[int]uint64{}, stop: make(chan struct{}), done: make(chan struct{})}
	t.sample(true)
	go func() {
		defer close(t.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-t.stop:
				t.sample(false)
				return
			case <-tick.C:
				t.sample(false)
			}
		}
	}()
	return t
}

// end stops the sampler and returns the CPU seconds and the peak RSS in bytes.
func (t *treeSampler) end() (float64, int64) {
	close(t.stop)
	<-t.done
	var ticks uint64
	for pid, last := range t.last {
		ticks += last - t.base[pid]
	}
	return float64(ticks) / 100, t.peakRSS // USER_HZ is 100 on Linux
}

func (t *treeSampler) sample(first bool) {
	procs := map[int]procStat{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok {
			procs[pid] = st
		}
	}
	in := map[int]bool{t.root: true}
	for changed := true; changed; { // the descendants of root, whatever order /proc lists them in
		changed = false
		for pid, st := range procs {
			if !in[pid] && in[st.ppid] {
				in[pid], changed = true, true
			}
		}
	}
	var rss int64
	t.mu.Lock()
	defer t.mu.Unlock()
	t.samples++
	withMemory := first || t.samples%10 == 0
	for pid := range in {
		st, ok := procs[pid]
		if !ok {
			continue
		}
		if _, seen := t.base[pid]; !seen {
			if first {
				t.base[pid] = st.ticks
			} else {
				t.base[pid] = 0
			}
		}
		t.last[pid] = st.ticks
		if withMemory {
			rss += pss(pid)
		}
	}
	t.peakRSS = max(t.peakRSS, rss)
}

type procStat struct {
	ppid  int
	ticks uint64 // utime + stime
}

// pss is a process's proportional set size in bytes (0 when it cannot be read).
func pss(pid int) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func readProcStat(pid int) (procStat, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(data, ')') // the command may hold spaces and parentheses
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(data[i+1:])) // f[0] is field 3, the state
	if len(f) < 13 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return procStat{ppid: ppid, ticks: ut + st}, true
}

// runPrerender renders pages through the prerender server, c requests at a time.
func runPrerender(b *testing.B, deps string, site *benchSite, pages []farmPage, c int) farmRun {
	b.Helper()
	port := freePort(b)
	_, portNum, _ := strings.Cut(port, ":")
	dbg := strings.TrimPrefix(freePort(b), "127.0.0.1:")
	script := fmt.Sprintf(`const prerender = require("prerender");
const server = prerender({port: %s, chromeLocation: "/usr/bin/chromium", browserDebuggingPort: %s,
  chromeFlags: ["--headless", "--disable-gpu", "--no-sandbox", "--remote-debugging-port=%s", "--hide-scrollbars"]});
server.use(prerender.blockResources());
server.use(prerender.removeScriptTags());
server.start();
`, portNum, dbg, dbg)
	path := filepath.Join(deps, fmt.Sprintf("server-%d.js", c))
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("node", path)
	cmd.Dir = deps
	var log lockedBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	base := "http://" + port + "/render?url="
	client := &http.Client{Timeout: 60 * time.Second}
	get := func(u string) (int, string, error) {
		resp, err := client.Get(base + url.QueryEscape(u))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	// Ready once it renders a warm-up page (its browser started, the libraries cached).
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code, body, err := get(site.URL + "/react-product/p/warm"); err == nil && code == 200 && strings.Contains(body, "Product warm") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the prerender server did not render a warm-up page in 60 s:\n%s", lastLogLines(log.String(), 20))
		}
		time.Sleep(200 * time.Millisecond) // polling for the server to come up, not letting time pass
	}
	r := farmRun{server: "prerender", concurrency: c, pages: len(pages)}
	tree := sampleTree(cmd.Process.Pid)
	start := time.Now()
	work := make(chan farmPage)
	var good, timeouts atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				code, body, err := get(p.url)
				switch {
				case err == nil && code == 200 && strings.Contains(body, p.want):
					good.Add(1)
				default:
					if code == 504 || err != nil && strings.Contains(err.Error(), "Timeout") {
						timeouts.Add(1)
					}
					mu.Lock()
					if r.firstBad == "" {
						r.firstBad, r.badGot = fmt.Sprintf("%s (status %d, err %v)", p.url, code, err), body
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range pages {
		work <- p
	}
	close(work)
	wg.Wait()
	r.wall = time.Since(start)
	r.cpu, r.peakRSS = tree.end()
	r.good, r.timeouts = int(good.Load()), int(timeouts.Load())
	return r
}

// defaultsInFlight is the pages in flight of the node runFreshq starts at its defaults: two render
// workers at the chrome renderer's render.concurrency derived from this machine's cores, as each
// of the node's processes derives it (they log it: "render concurrency").
func defaultsInFlight(b *testing.B) int {
	b.Helper()
	cfg, err := config.Parse([]byte("workers: 3\nrender:\n  renderer: chrome\n"))
	if err != nil {
		b.Fatal(err)
	}
	return 2 * assemble.RenderConcurrency(cfg)
}

// runFreshq renders pages with a freshq node's chrome renderer: c pages in flight (two render
// workers of ⌈c/2⌉ each), or its defaults (c is then defaultsInFlight).
func runFreshq(b *testing.B, site *benchSite, pages []farmPage, c int, defaults bool) farmRun {
	b.Helper()
	perWorker := (c + 1) / 2
	extra := fmt.Sprintf("render:\n  renderer: chrome\n  domains: [\"127.0.0.1\"]\n  concurrency: %d\n  hosts: {max_concurrency: %d}\n", perWorker, c)
	if defaults {
		extra = fmt.Sprintf("render:\n  renderer: chrome\n  domains: [\"127.0.0.1\"]\n  hosts: {max_concurrency: %d}\n", c)
	}
	n := startNode(b, b.TempDir(), 3, extra, "")
	waitFor(b, "ready", 60*time.Second, n.ready)
	submit := func(ps []farmPage) {
		var body bytes.Buffer
		for _, p := range ps {
			json.NewEncoder(&body).Encode(map[string]string{"url": p.url, "source": "api"})
		}
		resp, err := http.Post("http://"+n.addr+"/v1/targets", "application/x-ndjson", &body)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("POST /v1/targets: %d %s", resp.StatusCode, out)
		}
	}
	stored := func(p farmPage) (bool, string) {
		resp, err := http.Get("http://" + n.addr + "/v1/pages?url=" + url.QueryEscape(p.url))
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && strings.Contains(string(body), p.want), string(body)
	}
	renders := func() (all, timeouts float64) {
		for k, v := range n.metrics() {
			if strings.HasPrefix(k, "freshq_render_total{") {
				all += v
				if strings.Contains(k, `outcome="timeout"`) {
					timeouts += v
				}
			}
		}
		return all, timeouts
	}
	// Warm up as the prerender server is: the browsers started, the libraries cached.
	warm := []farmPage{{url: site.URL + "/react-product/p/warm", want: "Product warm"}}
	submit(warm)
	waitFor(b, "the warm-up page", 90*time.Second, func() bool { ok, _ := stored(warm[0]); return ok })
	before, timeoutsBefore := renders()

	r := farmRun{server: "freshq", concurrency: c, defaults: defaults, pages: len(pages)}
	tree := sampleTree(n.cmd.Process.Pid)
	start := time.Now()
	submit(pages)
	waitFor(b, "every page rendered once", 10*time.Minute, func() bool {
		all, _ := renders()
		return all-before >= float64(len(pages))
	})
	r.wall = time.Since(start)
	r.cpu, r.peakRSS = tree.end()
	_, t := renders()
	r.timeouts = int(t - timeoutsBefore)
	// The last results may still be on their way to the store: give them a moment, counted out
	// of the wall time and the CPU.
	for _, p := range pages {
		var ok bool
		var got string
		deadline := time.Now().Add(10 * time.Second)
		for {
			if ok, got = stored(p); ok || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond) // polling for the store, not letting time pass
		}
		if ok {
			r.good++
		} else if r.firstBad == "" {
			r.firstBad, r.badGot = p.url, got
		}
	}
	return r
}
