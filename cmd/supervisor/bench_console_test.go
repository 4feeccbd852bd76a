package main

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// consolePoller is a headless Chromium that loads the console's overview once a second while
// a benchmark runs, as an operator's open tab would (with its chart and assets): what the
// console costs the queue is then in the benchmark's figures. BenchmarkQueueOverhead starts one
// when FRESHQ_BENCH_CONSOLE_POLL=1 (scripts/bench-queue.sh's CONSOLE_POLL=1).
type consolePoller struct {
	cancel func()
	done   chan struct{}
	mu     sync.Mutex
	polls  int           // overview loads completed during the run
	failed int           // loads that failed (not those cut by the run's end)
	took   time.Duration // the completed loads' time, summed
}

// startConsolePoll starts the poller on n's console, or returns nil when the run does not ask
// for one. The browser is started and the overview loaded once before it returns, so that
// Chromium's start is not in the measurement; the polls are.
func startConsolePoll(b *testing.B, n *node) *consolePoller {
	b.Helper()
	if os.Getenv("FRESHQ_BENCH_CONSOLE_POLL") != "1" {
		return nil
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		b.Fatalf("FRESHQ_BENCH_CONSOLE_POLL=1 needs chromium: %v", err)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath("chromium"), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true))...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	p := &consolePoller{cancel: func() { cancelCtx(); cancelAlloc() }, done: make(chan struct{})}
	// The browser is started on ctx itself: a first action on a context derived from it (the
	// loads' timeouts) would tie the browser's life to that context and close it with it.
	if err := chromedp.Do(ctx); err != nil {
		p.cancel()
		b.Fatalf("starting chromium: %v", err)
	}
	overview := "http://" + n.addr + "/ui/"
	load := func() error {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return chromedp.Do(c, chromedp.Navigate(overview), chromedp.WaitVisible(chromedp.CSS(`#backlog-cold`)))
	}
	if err := load(); err != nil {
		p.cancel()
		b.Fatalf("the console's overview did not load: %v", err)
	}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(time.Second) // an open tab's refresh: wall time, the load it puts on the node
		defer tick.Stop()
		for {
			// A load at once, then one a tick; a load longer than a second skips the ticks it
			// covers: one tab, one load at a time.
			t0 := time.Now()
			err := load()
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
	b.Logf("console: %d overview loads, %d failed, %v in all", p.polls, p.failed, p.took)
	b.ReportMetric(float64(p.polls), "console-polls")
	if p.polls > 0 {
		b.ReportMetric(float64(p.took.Milliseconds())/float64(p.polls), "console-load-ms")
	}
	if p.failed > 0 {
		b.Errorf("%d of the console's overview loads failed during the run", p.failed)
	}
}
