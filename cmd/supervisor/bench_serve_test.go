package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/store"
)

// BenchmarkServe measures the crawler listener against nginx serving the same pages from
// files, in one run on this machine (scripts/bench-serve.sh, make bench-serve): PAGES stored
// pages of PAGE_BYTES each (FRESHQ_BENCH_PAGES, default 20000; FRESHQ_BENCH_PAGE_BYTES, default
// 30000), requests spread over them by a Zipf law (s = 1.1), on 1 and 64 keep-alive connections
// (FRESHQ_BENCH_CONNS) for FRESHQ_BENCH_SECONDS each (default 10), while the queue renders (half
// the pages are due; the sim renderer at 20 ms, 8 in flight, replaces them as it goes). It
// reports requests/s and the p50/p99 latency of each, and logs one table row per run
// ("| server | conns | ..."). The load generator runs in this process, on the same cores as
// both servers.
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
	pages, bytes := envInt("FRESHQ_BENCH_PAGES", 20000), envInt("FRESHQ_BENCH_PAGE_BYTES", 30000)
	seconds := envInt("FRESHQ_BENCH_SECONDS", 10)
	conns := []int{1, 64}
	if v := os.Getenv("FRESHQ_BENCH_CONNS"); v != "" {
		conns = nil
		for _, f := range strings.Fields(v) {
			n, _ := strconv.Atoi(f)
			conns = append(conns, n)
		}
	}
	dir := b.TempDir()
	site := filepath.Join(dir, "site")
	paths := seedServePages(b, dir, site, pages, bytes)

	serveAddr := freePort(b)
	n := startNode(b, dir, 3, fmt.Sprintf(`queue: {ready: {sweep_interval: 1s}}
render:
  renderer: sim
  concurrency: 8
  domains: [shop.test]
  sim: {latency_median: 20ms, transient_rate: 0, gone_rate: 0}
serve:
  listen: %s
`, serveAddr), "")
	waitFor(b, "readiness", 300*time.Second, n.ready)
	nginxAddr := benchNginx(b, nginx, dir, site)

	b.ResetTimer()
	for _, c := range conns {
		for _, srv := range []struct{ name, base, prefix string }{
			{"freshq", "http://" + serveAddr, "/https://shop.test"},
			{"nginx", "http://" + nginxAddr, ""},
		} {
			renders0 := n.metrics()[`freshq_render_total{outcome="ok"}`]
			r := loadZipf(b, srv.base, srv.prefix, paths, c, time.Duration(seconds)*time.Second)
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

// seedServePages stores n pages of about size bytes in dir's Badger store, half of them due, and
// writes the same bodies as files under site for nginx; it returns their paths.
func seedServePages(b *testing.B, dir, site string, n, size int) []string {
	st := badgerIn(dir).open(b)
	defer st.Close()
	now := clock.NowMs()
	filler := strings.Repeat(`<div class="product"><a href="/c/item">A product with a name</a><span>19.99</span></div>`+"\n", size/80+1)
	paths := make([]string, n)
	ws := make([]store.Write, 0, 2000)
	flush := func() {
		if err := st.WriteSchedules(ws); err != nil {
			b.Fatal(err)
		}
		ws = ws[:0]
	}
	for i := range n {
		paths[i] = fmt.Sprintf("/c/item-%07d", i)
		body := []byte(fmt.Sprintf("<!doctype html><title>item %d</title>\n%s", i, filler[:size]))
		url := "https://shop.test" + paths[i]
		key := "desktop|" + url
		due := now + 3_600_000
		if i%2 == 1 {
			due = now - int64(i)
		}
		sch, err := store.NewSchedule([]byte(key), due, true, 3_600_000, store.Lanes{})
		if err != nil {
			b.Fatal(err)
		}
		ws = append(ws, store.Write{Schedule: sch, Target: &store.Target{URL: url, Device: "desktop", Source: store.SourceSitemap},
			Page: &store.Page{Status: 200, Headers: []store.Header{{Name: "content-type", Value: "text/html; charset=utf-8"}}, Body: body, RenderedAtMs: now}})
		f := filepath.Join(site, paths[i])
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, body, 0o644); err != nil {
			b.Fatal(err)
		}
		if len(ws) == cap(ws) {
			flush()
		}
	}
	flush()
	return paths
}

// benchNginx serves site's files with nginx (two worker processes, as the machine's cores,
// sendfile, keep-alive) and returns its address.
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

type loadResult struct {
	perSec   float64
	p50, p99 time.Duration
	errors   int
}

// loadZipf sends GET base+prefix+path on conns keep-alive connections for d, paths drawn by a
// Zipf law, and measures each answer (read whole).
func loadZipf(b *testing.B, base, prefix string, paths []string, conns int, d time.Duration) loadResult {
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true}}
			z := rand.NewZipf(rand.New(rand.NewPCG(uint64(c), 7)), 1.1, 1, uint64(len(paths)-1))
			var mine []time.Duration
			bad := 0
			for time.Now().Before(deadline) {
				start := time.Now()
				resp, err := client.Get(base + prefix + paths[z.Uint64()])
				if err != nil {
					bad++
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					bad++
					continue
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(lat) == 0 {
		b.Fatalf("%s: no answer in %s (%d errors)", base, d, errs)
	}
	slices.Sort(lat)
	return loadResult{perSec: float64(len(lat)) / d.Seconds(), p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], errors: errs}
}
