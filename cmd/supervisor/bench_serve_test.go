package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/store"
)

// BenchmarkServe measures the crawler listener against nginx serving the same pages from
// files, in one run on this machine (scripts/bench-serve.sh, make bench-serve): PAGES stored
// pages of PAGE_BYTES each (FRESHQ_BENCH_PAGES, default 20000; FRESHQ_BENCH_PAGE_BYTES, default
// 30000), requests spread over them by a Zipf law (s = 1.1), on 1 and 64 keep-alive connections
// (FRESHQ_BENCH_CONNS) for FRESHQ_BENCH_SECONDS each (default 10), while the queue renders (half
// the pages are due; the sim renderer at 20 ms, 8 in flight, replaces them as it goes). Pages
// are stored gzipped, as worker 0 stores a render's, and nginx serves the same gzip bytes from
// .gz files (gzip_static); the requests accept gzip, as a prerender middleware's do. It
// reports requests/s and the p50/p99 latency of each, and logs one table row per run
// ("| server | conns | ..."). The load generator is wrk (Debian's package), on the same cores
// as both servers.
//
// With FRESHQ_BENCH_RENDERER=chrome the queue renders meanwhile through Chromium instead of the
// sim renderer: the pages' URLs are a local origin's (serveOrigin: each page's document, the
// same listing, with a script that fetches the page's stock from an API answering in 100 ms and
// adds it), and the node's chrome renderer renders the due half of them at its defaults
// (render.concurrency derived from the cores; render.hosts.max_concurrency raised past it, as the
// one site would otherwise hold the farm to 4 in flight), so the browsers take their share of the
// same cores all through the serving runs.
func BenchmarkServe(b *testing.B) {
	if binDir == "" {
		b.Skip("binaries not built (-short)")
	}
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		nginx = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(nginx); err != nil {
		b.Skip("no nginx here")
	}
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("no wrk here (Debian's package wrk): it is the load generator")
	}
	pages, size := envInt("FRESHQ_BENCH_PAGES", 20000), envInt("FRESHQ_BENCH_PAGE_BYTES", 30000)
	seconds := envInt("FRESHQ_BENCH_SECONDS", 10)
	conns := []int{1, 64}
	if v := os.Getenv("FRESHQ_BENCH_CONNS"); v != "" {
		conns = nil
		for _, f := range strings.Fields(v) {
			n, _ := strconv.Atoi(f)
			conns = append(conns, n)
		}
	}
	renderer := cmpEnv("FRESHQ_BENCH_RENDERER", "sim")
	origin, renderYAML := "https://shop.test", `render:
  renderer: sim
  concurrency: 8
  domains: [shop.test]
  sim: {latency_median: 20ms, transient_rate: 0, gone_rate: 0}
`
	switch renderer {
	case "sim":
	case "chrome":
		needChromiumBench(b)
		origin = serveOrigin(b, size)
		renderYAML = `render:
  renderer: chrome
  domains: ["127.0.0.1"]
  hosts: {max_concurrency: 256}
`
	default:
		b.Fatalf("FRESHQ_BENCH_RENDERER=%q: sim or chrome", renderer)
	}
	dir := b.TempDir()
	site := filepath.Join(dir, "site")
	paths := seedServePages(b, dir, site, origin, pages, size)

	serveAddr := freePort(b)
	sweep := os.Getenv("FRESHQ_BENCH_SWEEP") // queue.ready.sweep_interval; 1s unless set
	if sweep == "" {
		sweep = "1s"
	}
	n := startNode(b, dir, 3, fmt.Sprintf(`queue: {ready: {sweep_interval: %s}}
%sserve:
  listen: %s
`, sweep, renderYAML, serveAddr), "")
	waitFor(b, "readiness", 30*time.Minute, n.ready) // a million rows: the class index is rebuilt first
	if renderer == "chrome" {
		// The browsers started and rendering before the serving runs begin.
		waitFor(b, "the first chrome renders", 2*time.Minute, func() bool { return n.metrics()[`freshq_render_total{outcome="ok"}`] > 0 })
	}
	b.Logf("rendering meanwhile with %s", renderer)
	nginxAddr := benchNginx(b, nginx, dir, site)
	sameBytes(b, "http://"+serveAddr+"/"+origin+paths[0], "http://"+nginxAddr+paths[0]) // page 0 is not due: never rendered again

	reqs := zipfPaths(paths)
	b.ResetTimer()
	for _, c := range conns {
		for _, srv := range []struct{ name, base, prefix string }{
			{"freshq", "http://" + serveAddr, "/" + origin},
			{"nginx", "http://" + nginxAddr, ""},
		} {
			renders0 := n.metrics()[`freshq_render_total{outcome="ok"}`]
			r := loadWrk(b, wrk, srv.base, srv.prefix, reqs, c, time.Duration(seconds)*time.Second)
			rendered := n.metrics()[`freshq_render_total{outcome="ok"}`] - renders0
			b.ReportMetric(r.perSec, srv.name+"-c"+strconv.Itoa(c)+"-req/s")
			b.ReportMetric(r.p99.Seconds()*1000, srv.name+"-c"+strconv.Itoa(c)+"-p99-ms")
			b.Logf("| %s | %d | %.0f | %.2f | %.2f | %d | %.0f |", srv.name, c, r.perSec, r.p50.Seconds()*1000,
				r.p99.Seconds()*1000, r.errors, rendered)
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// seedServePages stores n pages of about size bytes in dir's Badger store, their URLs under
// origin, half of them due, and writes the same stored bytes as files under site for nginx; it
// returns their paths. Each
// page is a product listing of its own (benchPage), stored as a render's result is: compressed
// by intake.CompressPage, through the store's funnel (WriteSchedules, in batches), and its
// nginx file is the same gzip bytes (path + ".gz", served by gzip_static). Pages are built and
// compressed on every core, the store written by one goroutine, so a million pages load in
// minutes.
func seedServePages(b *testing.B, dir, site, origin string, n, size int) []string {
	st := badgerIn(dir).open(b)
	defer st.Close()
	now := clock.NowMs()
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("/c/%04d/item-%07d", i/1000, i)
	}
	for d := 0; d*1000 < n; d++ {
		if err := os.MkdirAll(filepath.Join(site, fmt.Sprintf("c/%04d", d)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	const batch = 1000
	type built struct {
		from int
		ws   []store.Write
	}
	batches := make(chan built, 4)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	var next atomic.Int64
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			var html []byte
			for {
				from := int(next.Add(batch)) - batch
				if from >= n || failed.Load() != nil {
					return
				}
				ws := make([]store.Write, 0, batch)
				for i := from; i < min(n, from+batch); i++ {
					html = benchPage(html[:0], i, size)
					body, headers := intake.CompressPage(html, []store.Header{{Name: "content-type", Value: "text/html; charset=utf-8"}})
					url := origin + paths[i]
					due := now + 3_600_000
					if i%2 == 1 {
						due = now - int64(i)
					}
					sch, err := store.NewSchedule([]byte("desktop|"+url), due, true, 3_600_000, store.Lanes{})
					if err == nil {
						err = os.WriteFile(filepath.Join(site, paths[i])+".gz", body, 0o644)
					}
					if err != nil {
						failed.CompareAndSwap(nil, &err)
						return
					}
					ws = append(ws, store.Write{Schedule: sch, Target: &store.Target{URL: url, Device: "desktop", Source: store.SourceSitemap},
						Page: &store.Page{Status: 200, Headers: headers, Body: body, RenderedAtMs: now}})
				}
				batches <- built{from, ws}
			}
		})
	}
	go func() { wg.Wait(); close(batches) }()
	var stored, storedBytes int
	for bt := range batches {
		if failed.Load() != nil {
			continue
		}
		if err := st.WriteSchedules(bt.ws); err != nil {
			failed.CompareAndSwap(nil, &err)
			continue
		}
		stored += len(bt.ws)
		for _, w := range bt.ws {
			storedBytes += len(w.Page.Body)
		}
	}
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	if stored != n {
		b.Fatalf("stored %d pages of %d", stored, n)
	}
	b.Logf("seeded %d pages of %d bytes, %d bytes gzipped on average", n, size, storedBytes/n)
	return paths
}

// benchWords are what a shop's listing pages are made of.
var benchWords = strings.Fields(`leather canvas suede running trail walking hiking boot sneaker sandal loafer
	oxford derby chelsea waterproof breathable lightweight cushioned classic vintage premium organic
	cotton wool merino linen denim black white navy olive sand grey burgundy tan cognac charcoal ivory
	men women kids unisex wide narrow regular slim relaxed tapered high low mid top sole heel toe lace
	zip buckle strap insole outsole rubber foam recycled vegan handmade italian portuguese spring summer
	autumn winter collection edition limited new sale bestseller gift free shipping returns size fit
	true small large medium comfort support grip durable stitched padded collar tongue eyelet welt`)

// benchPage appends to buf a shop's product listing page of about size bytes: one head and
// navigation every page shares, then products whose names, prices, ratings, stock and
// descriptions a generator seeded with i draws, so that the bytes differ on every page and in
// every product, as a real catalogue's do.
func benchPage(buf []byte, i, size int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	word := func() string { return benchWords[r.IntN(len(benchWords))] }
	buf = fmt.Appendf(buf, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>%s %s shoes, page %d | Shop</title>
<meta name="viewport" content="width=device-width,initial-scale=1"><link rel="canonical" href="https://shop.test/c/%04d/item-%07d">
<link rel="stylesheet" href="/static/app.3f9a1c.css"><script defer src="/static/app.8b2e7d.js"></script></head>
<body class="listing"><header class="site-header"><a class="logo" href="/">Shop</a><nav><ul class="menu">
<li><a href="/c/men">Men</a></li><li><a href="/c/women">Women</a></li><li><a href="/c/kids">Kids</a></li><li><a href="/c/sale">Sale</a></li>
</ul></nav><form class="search" action="/search"><input name="q" placeholder="Search"></form></header>
<main><h1>%s %s</h1><ol class="products">
`, word(), word(), i%50+1, i/1000, i, word(), word())
	for len(buf) < size-400 {
		id := r.IntN(10_000_000)
		buf = fmt.Appendf(buf, `<li class="product" data-sku="SKU-%07d"><a href="/p/%07d-%s-%s"><img src="/img/%07d-%d.webp" alt="%s %s %s" loading="lazy" width="320" height="320">
<h2 class="name">%s %s %s %s</h2></a><p class="price"><span class="now">%d.%02d</span> <s class="was">%d.%02d</s></p>
<p class="rating" aria-label="%d.%d out of 5">%d reviews</p><p class="desc">%s %s %s %s %s %s %s %s %s %s.</p><p class="stock">%s</p></li>
`, id, id, word(), word(), id, r.IntN(9), word(), word(), word(), word(), word(), word(), word(),
			10+r.IntN(290), r.IntN(100), 20+r.IntN(400), r.IntN(100), 1+r.IntN(4), r.IntN(10), r.IntN(5000),
			word(), word(), word(), word(), word(), word(), word(), word(), word(), word(),
			[]string{"In stock", "Only a few left", "Ships in 2 days", "Back soon"}[r.IntN(4)])
	}
	return fmt.Appendf(buf, `</ol><nav class="pager"><a href="?page=%d">Next</a></nav></main>
<footer><p>&copy; Shop. Free returns within 30 days.</p></footer></body></html>
`, i%50+2)
}

// benchNginx serves site's files with nginx (two worker processes, as the machine's cores,
// sendfile, keep-alive, gzip_static: each page is its .gz file, sent as it is to a client that
// accepts gzip) and returns its address.
func benchNginx(b *testing.B, nginx, dir, site string) string {
	addr := freePort(b)
	for p := site; p != "/" && p != "."; p = filepath.Dir(p) {
		os.Chmod(p, 0o755) // nginx's workers run as another user when it starts as root
	}
	conf := fmt.Sprintf(`pid %[1]s/nginx.pid;
worker_processes 2;
error_log stderr error;
events { worker_connections 1024; }
http {
    default_type text/html;
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    gzip_static on;
    gzip_vary on;
    server { listen %[2]s; root %[3]s; }
}
`, dir, addr, site)
	cfg := filepath.Join(dir, "nginx.conf")
	os.WriteFile(cfg, []byte(conf), 0o600)
	cmd := exec.Command(nginx, "-e", "stderr", "-p", dir, "-c", cfg, "-g", "daemon off;")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stopProcess(cmd) })
	waitFor(b, "nginx", 20*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}

// gzipGet is a crawler's request as a prerender middleware sends it: accepting gzip (the
// client's transport leaves the body compressed).
func gzipGet(url string) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	return req
}

// sameBytes checks that freshq and nginx answer a page with the same gzip bytes: the
// comparison is of the same work.
func sameBytes(b *testing.B, urls ...string) {
	var bodies [][]byte
	for _, u := range urls {
		resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(gzipGet(u))
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
			b.Fatalf("%s: %d, Content-Encoding %q", u, resp.StatusCode, resp.Header.Get("Content-Encoding"))
		}
		bodies = append(bodies, body)
	}
	for i := 1; i < len(bodies); i++ {
		if !bytes.Equal(bodies[0], bodies[i]) {
			b.Fatalf("%s and %s answer different bytes (%d, %d)", urls[0], urls[i], len(bodies[0]), len(bodies[i]))
		}
	}
}

type loadResult struct {
	perSec   float64
	p50, p99 time.Duration
	errors   int
}

// zipfPaths are the benchmark's requests: zipfRequests paths drawn by a Zipf law (s = 1.1) over
// paths, the same sequence for both servers. Page 0 is the most asked for.
func zipfPaths(paths []string) []string {
	z := rand.NewZipf(rand.New(rand.NewPCG(7, 7)), 1.1, 1, uint64(len(paths)-1))
	out := make([]string, zipfRequests)
	for i := range out {
		out[i] = paths[z.Uint64()]
	}
	return out
}

// zipfRequests is how many requests wrk's threads cycle through: more than a run sends at
// 64 connections on this machine, so that a run repeats none of its sequence.
const zipfRequests = 500_000

// loadWrk sends GET base+prefix+path, for the paths of reqs in turn, accepting gzip, on conns
// keep-alive connections for d, with wrk (testdata/wrk/zipf.lua), and reads its count,
// latencies and errors. wrk, not a Go client in this process, is the load: a load generator's
// own CPU is taken from both servers on a 2-core machine, and Go's HTTP client costs several
// times what wrk does per request.
func loadWrk(b *testing.B, wrk, base, prefix string, reqs []string, conns int, d time.Duration) loadResult {
	list := filepath.Join(b.TempDir(), "requests")
	var buf bytes.Buffer
	for _, p := range reqs {
		buf.WriteString(prefix + p + "\n")
	}
	if err := os.WriteFile(list, buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	script, err := filepath.Abs("testdata/wrk/zipf.lua")
	if err != nil {
		b.Fatal(err)
	}
	threads := min(conns, runtime.NumCPU())
	out, err := exec.Command(wrk, "-t", strconv.Itoa(threads), "-c", strconv.Itoa(conns),
		"-d", strconv.Itoa(int(d.Seconds()))+"s", "--timeout", "10s", "-s", script, base, "--", list).CombinedOutput()
	if err != nil {
		b.Fatalf("wrk: %v\n%s", err, out)
	}
	r, err := parseWrk(out)
	if err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	if r.perSec == 0 {
		b.Fatalf("%s: no answer in %s\n%s", base, d, out)
	}
	return r
}

// parseWrk reads the line testdata/wrk/zipf.lua's done prints.
func parseWrk(out []byte) (loadResult, error) {
	var requests, micros, p50, p99 int64
	var errs int
	for line := range strings.Lines(string(out)) {
		if _, err := fmt.Sscanf(line, "wrk-result requests=%d micros=%d p50=%d p99=%d errors=%d",
			&requests, &micros, &p50, &p99, &errs); err == nil && micros > 0 {
			return loadResult{perSec: float64(requests) / (float64(micros) / 1e6), p50: time.Duration(p50) * time.Microsecond,
				p99: time.Duration(p99) * time.Microsecond, errors: errs}, nil
		}
	}
	return loadResult{}, errors.New("wrk printed no wrk-result line")
}

// The benchmark reads wrk's figures from the line testdata/wrk/zipf.lua prints, and refuses an
// output without it (a wrk that failed to load the script prints its own summary only).
func TestParseWrk(t *testing.T) {
	out := []byte("Running 30s test @ http://127.0.0.1:3000\n  2 threads and 64 connections\n" +
		"wrk-result requests=300000 micros=30000000 p50=4100 p99=18500 errors=3\n")
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.perSec != 10000 || r.p50 != 4100*time.Microsecond || r.p99 != 18500*time.Microsecond || r.errors != 3 {
		t.Errorf("parsed %+v", r)
	}
	if _, err := parseWrk([]byte("Running 30s test @ http://127.0.0.1:3000\n  Requests/sec: 9000\n")); err == nil {
		t.Error("an output without the script's line parsed")
	}
}

// serveOrigin serves the pages BenchmarkServe's chrome renderer renders, on loopback, and returns
// its base URL: page i's document (/c/NNNN/item-NNNNNNN) is benchPage's listing with a script
// that fetches the page's stock (/api/stock/i, answered in 100 ms, as a shop's API) and adds it
// to the page; its stylesheet and script are small and cacheable, its images answer 204.
func serveOrigin(b *testing.B, size int) string {
	const app = `<script>fetch("/api/stock/" + document.body.dataset.item).then(r => r.text())
  .then(t => document.querySelector("main").insertAdjacentHTML("afterbegin", "<p class=stock-live>" + t + "</p>"))</script>`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/stock/"):
			select {
			case <-time.After(100 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "%s units in stock", strings.TrimPrefix(r.URL.Path, "/api/stock/"))
		case strings.HasPrefix(r.URL.Path, "/static/"):
			w.Header().Set("Cache-Control", "public, max-age=86400")
			if strings.HasSuffix(r.URL.Path, ".css") {
				w.Header().Set("Content-Type", "text/css")
				io.WriteString(w, "body{font-family:sans-serif}.product{display:inline-block;width:30%}")
				return
			}
			w.Header().Set("Content-Type", "text/javascript")
			io.WriteString(w, "document.documentElement.classList.add('js')")
		case strings.HasPrefix(r.URL.Path, "/c/"):
			var d, i int
			if _, err := fmt.Sscanf(r.URL.Path, "/c/%d/item-%d", &d, &i); err != nil {
				http.NotFound(w, r)
				return
			}
			page := string(benchPage(nil, i, size))
			page = strings.Replace(page, `<body class="listing">`, fmt.Sprintf(`<body class="listing" data-item="%d">`, i), 1)
			page = strings.Replace(page, "</body>", app+"</body>", 1)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, page)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}
