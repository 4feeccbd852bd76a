package chrome

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// The figures of docs/BENCHMARKS.md (Chrome renderer): renders per second of a small local
// page, the long-lived browser with 4 tabs against the exec renderer starting
// `chromium --headless --dump-dom` per page (4 at once), in the same run; and the browser's
// memory after 1,000 renders with and without recycling.
//
// The page declares itself ready (window.prerenderReady = true), as a prerendered site would:
// readiness then waits for no network quiet (render.chrome.idle), and the figures are the
// renderer's own cost.

const benchPage = `<!doctype html><html><head><title>bench</title></head><body><h1>hello</h1>
<script>document.body.insertAdjacentHTML("beforeend", "<p>rendered by script</p>"); window.prerenderReady = true;</script></body></html>`

func benchOrigin(b *testing.B) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(benchPage))
	}))
	b.Cleanup(s.Close)
	return s
}

func benchCfg() Options {
	c := defaultOptions()
	c.Timeout = 30 * time.Second
	c.Domains = []string{"127.0.0.1"}
	return c // render.chrome.idle as by default: the page declares itself ready
}

// renderAll renders n pages with 4 renders at once and fails on any that is not ok.
func renderAll(b *testing.B, r render.Renderer, url string, n int) {
	var wg sync.WaitGroup
	jobs := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if res := r.Render(context.Background(), render.Request{URL: url}); res.Outcome != outcome.OK {
					b.Errorf("%v at %s: %s", res.Outcome, res.Stage, res.Err)
				}
			}
		}()
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
}

// BenchmarkRenderChrome4Tabs renders with one long-lived browser, 4 tabs at once: the page
// that declares itself ready (the renderer's own cost), and a single-page app as real sites
// serve one (cacheableSPA: scripts cacheable, its content fetched after load, answered in
// 300 ms), which waits for network idleness (render.chrome.idle as by default) with
// render.timeout 10s. The app's figures are renders/s and the share of renders that timed out
// (timeout-%); a render that neither timed out nor captured the content fails the benchmark.
func BenchmarkRenderChrome4Tabs(b *testing.B) {
	needChromium(b)
	b.Run("ready", func(b *testing.B) {
		s := benchOrigin(b)
		r, err := New(benchCfg(), Hooks{})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		b.ResetTimer()
		start := time.Now()
		renderAll(b, r, s.URL+"/", b.N)
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "renders/s")
	})
	b.Run("cachedSPA", func(b *testing.B) {
		s := newSite(b)
		s.cacheableSPA("/spa", 300*time.Millisecond)
		cfg := benchCfg()
		cfg.Timeout = 10 * time.Second
		r, err := New(cfg, Hooks{})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		renderMany(r, s.URL+"/spa/", 4, 4) // the tabs open and the cache fills
		b.ResetTimer()
		start := time.Now()
		results := renderMany(r, s.URL+"/spa/", b.N, 4)
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "renders/s")
		timeouts := 0
		for _, res := range results {
			switch {
			case res.Outcome == outcome.Timeout:
				timeouts++
			case res.Outcome != outcome.OK || !bytes.Contains(res.Body, []byte("fetched content")):
				b.Errorf("%v at %s (%s): %.200s", res.Outcome, res.Stage, res.Err, res.Body)
			}
		}
		b.ReportMetric(100*float64(timeouts)/float64(b.N), "timeout-%")
	})
}

// spaScripts are the scripts of the cacheable single-page app: served with a long max-age, as
// real sites serve their bundles, so that a long-lived browser takes them from its cache.
const spaScripts = 6

// cacheableSPA serves, under prefix, a single-page app as real sites serve one: its document
// uncacheable, its scripts cacheable for an hour, and its content fetched from the same origin
// after load, the answer taking fetchDelay.
func (s *site) cacheableSPA(prefix string, fetchDelay time.Duration) {
	var scripts strings.Builder
	for i := range spaScripts {
		fmt.Fprintf(&scripts, `<script src="%s/lib%d.js"></script>`, prefix, i)
		s.mux.HandleFunc(fmt.Sprintf("%s/lib%d.js", prefix, i), func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/javascript")
			w.Header().Set("Cache-Control", "public, max-age=3600")
			fmt.Fprintf(w, "window.lib%d = %d;", i, i)
		})
	}
	s.mux.HandleFunc(prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		fmt.Fprintf(w, `<!doctype html><html><head>%s</head><body><div id=app>loading</div><script>
addEventListener("load", () => fetch("%s/api/data?" + location.pathname).then(r => r.json()).then(d => {
  document.getElementById("app").textContent = d.title;
}));</script></body></html>`, scripts.String(), prefix)
	})
	s.mux.HandleFunc(prefix+"/api/data", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(fetchDelay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(`{"title":"fetched content"}`))
	})
}

func BenchmarkRenderExecDumpDOM4(b *testing.B) {
	path := needChromium(b)
	s := benchOrigin(b)
	cfg := benchCfg()
	cfg.Renderer = "exec"
	// The exec renderer runs the command as the worker's own user: as root, Chromium needs
	// --no-sandbox (the chrome renderer drops to render.chrome.user instead).
	cfg.ExecCommand = []string{path, "--headless", "--disable-gpu", "--no-sandbox", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--dump-dom"}
	r, err := render.NewExec(cfg.Options)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	renderAll(b, r, s.URL+"/", b.N)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "renders/s")
}

// BenchmarkRSSAfter1000 renders 1,000 pages (per iteration), 4 at once, and reports the
// browser's memory after them: MiB-pss is the renderer's own figure (render.chrome.max_rss: the
// Pss of the browser's processes, summed), MiB-rss the plain RSS sum of the same processes
// (shared pages counted once per process), the Pss after the first 100 renders, and the
// largest Pss seen after each 100.
// Never recycled, and recycled every 150 renders (so that a browser is running at the end).
func BenchmarkRSSAfter1000(b *testing.B) {
	needChromium(b)
	s := benchOrigin(b)
	for _, c := range []struct {
		name    string
		recycle int
	}{{"norecycle", 1 << 30}, {"recycle150", 150}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := benchCfg()
			cfg.RecycleAfter = c.recycle
			for range b.N {
				r, err := New(cfg, Hooks{})
				if err != nil {
					b.Fatal(err)
				}
				var maxPss, firstPss int64
				for i := range 10 {
					renderAll(b, r, s.URL+"/", 100)
					pss := r.RSS()
					maxPss = max(maxPss, pss)
					if i == 0 {
						firstPss = pss
					}
				}
				r.mu.Lock()
				cur := r.cur
				r.mu.Unlock()
				if cur == nil {
					b.Fatal("no browser running after the renders")
				}
				b.ReportMetric(float64(cur.rss())/(1<<20), "MiB-pss")
				b.ReportMetric(float64(plainRSS(cur))/(1<<20), "MiB-rss")
				b.ReportMetric(float64(maxPss)/(1<<20), "MiB-pss-max")
				b.ReportMetric(float64(firstPss)/(1<<20), "MiB-pss-at-100")
				b.ReportMetric(float64(r.Restarts()), "restarts")
				r.Close()
			}
		})
	}
}

// plainRSS is the sum of VmRSS over the browser's process group.
func plainRSS(br *browser) int64 {
	var total int64
	forEachProc(func(pid int) {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(br.pgid) {
			return
		}
		status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		if err != nil {
			return
		}
		for line := range strings.Lines(string(status)) {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				total += kb << 10
			}
		}
	})
	return total
}

// renderMany renders url n times, concurrency at once, and returns the results.
func renderMany(r *Renderer, url string, n, concurrency int) []render.Result {
	results := make([]render.Result, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = r.Render(context.Background(), render.Request{URL: url})
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}
