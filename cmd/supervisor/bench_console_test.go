package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/freshq/freshq/render/chrome/nice"
)

// consolePoller loads the console's overview once a second while a benchmark runs, as an
// operator's open tab would: what the console costs the queue is then in the benchmark's
// figures. BenchmarkQueueOverhead starts one when FRESHQ_BENCH_CONSOLE_POLL asks for it
// (scripts/bench-queue.sh's CONSOLE_POLL):
//
//   - 1 or browser: a headless Chromium navigates to /ui/ and waits for the page drawn, with
//     its chart and assets. Chromium's CPU is the operator's, not the node's, but it shares the
//     cores with the queue.
//   - browser-nice: the same browser at nice 19 (under coreutils' nice, as render.chrome.nice
//     starts the render workers' browsers), so that it runs on the cores the queue leaves: an
//     operator's tab is on the operator's machine, not the node's.
//   - http: the same requests a browser makes for the overview (the page, its stylesheet and
//     icon, the chart), made by this process with Go's HTTP client and read to the end. What the
//     node spends answering a tab without a browser's CPU beside it: the two modes together
//     tell the server's cost from the browser's.
type consolePoller struct {
	mode   string
	load   func(ctx context.Context) error // one overview load
	cancel func()
	done   chan struct{}
	mu     sync.Mutex
	polls  int           // overview loads completed during the run
	failed int           // loads that failed (not those cut by the run's end)
	took   time.Duration // the completed loads' time, summed
}

// startConsolePoll starts the poller on n's console, or returns nil when the run does not ask
// for one. A browser is started and the overview loaded once before it returns, so that
// Chromium's start is not in the measurement; the polls are.
func startConsolePoll(b *testing.B, n *node) *consolePoller {
	b.Helper()
	overview := "http://" + n.addr + "/ui/"
	var p *consolePoller
	switch mode := os.Getenv("FRESHQ_BENCH_CONSOLE_POLL"); mode {
	case "", "0":
		return nil
	case "1", "browser":
		p = browserPoller(b, overview, 0)
	case "browser-nice":
		p = browserPoller(b, overview, 19)
	case "http":
		p = httpPoller(overview)
	default:
		b.Fatalf("FRESHQ_BENCH_CONSOLE_POLL=%q: want 0, 1 (browser), browser-nice or http", mode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.done = make(chan struct{})
	closeLoads := p.cancel
	p.cancel = func() { cancel(); closeLoads() }
	loadOnce := func() error {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return p.load(c)
	}
	if err := loadOnce(); err != nil {
		p.cancel()
		b.Fatalf("the console's overview did not load (%s): %v", p.mode, err)
	}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(time.Second) // an open tab's refresh: wall time, the load it puts on the node
		defer tick.Stop()
		for {
			// A load at once, then one a tick; a load longer than a second skips the ticks it
			// covers: one tab, one load at a time.
			t0 := time.Now()
			err := loadOnce()
			p.mu.Lock()
			if err != nil && ctx.Err() == nil {
				p.failed++
			} else if err == nil {
				p.polls++
				p.took += time.Since(t0)
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// browserPoller is a headless Chromium on overview, at niceness niceness (0: this process's),
// started before it returns.
func browserPoller(b *testing.B, overview string, niceness int) *consolePoller {
	if _, err := exec.LookPath("chromium"); err != nil {
		b.Fatalf("FRESHQ_BENCH_CONSOLE_POLL=1 needs chromium: %v", err)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath("chromium"), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			if err := nice.Wrap(cmd, niceness); err != nil {
				b.Fatalf("the console's browser at nice %d: %v", niceness, err)
			}
		}))...)
	bctx, cancelCtx := chromedp.NewContext(allocCtx)
	mode := "browser"
	if niceness > 0 {
		mode = "browser at nice " + strconv.Itoa(niceness)
	}
	p := &consolePoller{mode: mode, cancel: func() { cancelCtx(); cancelAlloc() }}
	// The browser is started on bctx itself: a first action on a context derived from it (the
	// loads' timeouts) would tie the browser's life to that context and close it with it.
	if err := chromedp.Do(bctx); err != nil {
		p.cancel()
		b.Fatalf("starting chromium: %v", err)
	}
	p.load = func(ctx context.Context) error {
		// The load's deadline and the run's end, on the browser's own context.
		c, cancel := context.WithCancel(bctx)
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		return chromedp.Do(c, chromedp.Navigate(overview), chromedp.WaitVisible(chromedp.CSS(`#backlog-cold`)))
	}
	return p
}

// httpPoller makes the overview's requests with Go's HTTP client: the page (which must be the
// overview, its backlog drawn), then what it links, each answered 200 and read to the end. The
// list of assets is the layout's and the overview's (console/templates); a page that no longer
// links the layout's fails the load, so the poller cannot silently ask for less than a browser
// would.
func httpPoller(overview string) *consolePoller {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	base := strings.TrimSuffix(overview, "/ui/")
	get := func(ctx context.Context, url string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept-Encoding", "gzip") // as a browser asks
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return body, nil
	}
	p := &consolePoller{mode: "http", cancel: client.CloseIdleConnections}
	p.load = func(ctx context.Context) error {
		page, err := get(ctx, overview)
		if err != nil {
			return err
		}
		if !bytes.Contains(page, []byte(`id="backlog-cold"`)) {
			return fmt.Errorf("GET %s: not the overview (no backlog)", overview)
		}
		assets := []string{"/ui/static/console.css", "/ui/static/favicon.svg"}
		for _, asset := range assets {
			if !bytes.Contains(page, []byte(`"`+asset+`"`)) {
				return fmt.Errorf("the overview no longer links %s: the poller's list is out of date", asset)
			}
		}
		if bytes.Contains(page, []byte(`"/ui/chart.svg"`)) { // drawn when worker 0 keeps the series
			assets = append(assets, "/ui/chart.svg")
		}
		for _, asset := range assets {
			if _, err := get(ctx, base+asset); err != nil {
				return err
			}
		}
		return nil
	}
	return p
}

// stop ends the polling and reports the overview loads completed during the run (console-polls)
// and their mean time (console-load-ms: the page and its assets, under the run's load), and
// any that failed, which fail the benchmark: a console that stops answering under load is a
// finding.
func (p *consolePoller) stop(b *testing.B) {
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	b.Logf("console (%s): %d overview loads, %d failed, %v in all", p.mode, p.polls, p.failed, p.took)
	b.ReportMetric(float64(p.polls), "console-polls")
	if p.polls > 0 {
		b.ReportMetric(float64(p.took.Milliseconds())/float64(p.polls), "console-load-ms")
	}
	if p.failed > 0 {
		b.Errorf("%d of the console's overview loads failed during the run", p.failed)
	}
}
