package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// consoleBrowser is a real Chromium on the console at origin, as the console's browser tests
// drive it: its context (bounded to 3 minutes, closed when the test ends), a watch of what the
// page logs and asks for (browserWatch), and the steps a test takes, each failing the test
// with what it was doing.
type consoleBrowser struct {
	t   *testing.T
	ctx context.Context
	bw  *browserWatch
}

func newConsoleBrowser(t *testing.T, origin string) *consoleBrowser {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath("chromium"), chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true))...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelT)
	b := &consoleBrowser{t: t, ctx: ctx, bw: &browserWatch{origin: origin}}
	if err := chromedp.Listen(ctx, b.bw.listen); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return b
}

// run takes the steps of what, or fails the test.
func (b *consoleBrowser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// text is the trimmed text of the element sel selects.
func (b *consoleBrowser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("reading %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// eval is the string js evaluates to in the page.
func (b *consoleBrowser) eval(js string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", js, err)
	}
	return s
}

// shot saves the page as console-name.png in the test's artifact directory.
func (b *consoleBrowser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.t.ArtifactDir(), "console-"+name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// startConsoleNode starts a node of two workers with the sim renderer, a crawler listener and
// storeYAML's store, waits for it to be ready and loads make run's demo corpus into it: what
// the console's browser tests look at. It returns the node and the crawler listener's address.
func startConsoleNode(t *testing.T, storeYAML string) (*node, string) {
	t.Helper()
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, fmt.Sprintf(`token: %s
queue: {ready: {sweep_interval: 1s}}
render: {renderer: sim, concurrency: 2}
serve: {listen: %s, tokens: [crawl-token]}
`, consoleToken, serveAddr)+storeYAML, "")
	waitFor(t, "ready", 60*time.Second, n.ready)
	corpus, err := os.ReadFile(filepath.Join("..", "..", "examples", "demo-targets.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.addr+"/v1/targets", bytes.NewReader(corpus))
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("loading the demo corpus: %v %v", err, resp)
	}
	resp.Body.Close()
	return n, serveAddr
}
