package chrome

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/network"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// Hooks are told what a renderer does that a metric counts. Each may be nil; each must return
// at once (it runs on a render's path).
type Hooks struct {
	// Blocked is a request refused before it loaded: "type" (render.chrome.block_types),
	// "pattern" (render.chrome.block) or "policy" (render.domains, the address policy, a scheme
	// other than http and https).
	Blocked func(reason string)
	// Restarted is a browser retired for a new one: "recycle" (render.chrome.recycle_after),
	// "rss" (render.chrome.max_rss) or "crash" (it exited or stopped answering).
	Restarted func(reason string)
}

// Renderer is the chrome renderer. See the package doc.
type Renderer struct {
	cfg        Options
	blockTypes map[network.ResourceType]bool
	block      []pattern
	allow      []allowance // render.chrome.allow, in its order
	egress     *egress
	hooks      Hooks
	startLimit time.Duration

	mu      sync.Mutex
	cur     *browser
	closed  bool
	closing sync.WaitGroup // retired browsers being closed
	renders sync.WaitGroup // renders running, on any browser

	rssCheckedAt atomic.Int64 // unix ns of the last RSS look
	restarts     atomic.Int64

	// now is the clock render.chrome.cache_max_age is measured by; tests set their own.
	now func() time.Time
	// cacheEpoch is the highest render.Request.CacheEpoch the browser's cache was cleared at
	// (under mu).
	cacheEpoch uint64
}

// rssEvery is how often, at most, the browser's memory is looked at. Summing the Pss of its
// processes walks their memory maps (smaps_rollup): 45–125 ms of a core on a busy machine, so
// it is done off the render's path, one look at a time, and not more often than this.
const rssEvery = 5 * time.Second

// startTimeout bounds a browser's start: a cold start on a busy machine takes seconds.
const startTimeout = 30 * time.Second

// New starts the chrome renderer for cfg: the egress proxy and the browser, so that a browser
// that cannot start fails the worker at start, not every render.
func New(cfg Options, hooks Hooks) (*Renderer, error) {
	switch {
	case cfg.Timeout <= 0:
		return nil, errors.New("chrome: render.timeout must be positive")
	case cfg.MaxBody <= 0:
		return nil, errors.New("chrome: render.max_body must be positive")
	case cfg.Idle <= 0:
		return nil, errors.New("chrome: render.chrome.idle must be positive")
	case cfg.RecycleAfter < 1:
		return nil, errors.New("chrome: render.chrome.recycle_after must be at least 1")
	}
	if _, err := exec.LookPath(cfg.Path); err != nil {
		return nil, fmt.Errorf("chrome: render.chrome.path: %w (install Chromium: apt-get install chromium)", err)
	}
	if _, err := account(cfg.User); err != nil {
		return nil, err
	}
	r := &Renderer{cfg: cfg, hooks: hooks, blockTypes: map[network.ResourceType]bool{}, startLimit: startTimeout, now: time.Now}
	for _, t := range cfg.BlockTypes {
		r.blockTypes[resourceType(t)] = true
	}
	for _, p := range cfg.Block {
		r.block = append(r.block, compilePattern(p))
	}
	for _, a := range cfg.Allow {
		r.allow = append(r.allow, compileAllow(a))
	}
	removeStaleProfiles()
	eg, err := startEgress(cfg.Domains)
	if err != nil {
		return nil, fmt.Errorf("chrome: egress proxy: %w", err)
	}
	eg.onRefuse = func() { r.count(r.hooks.Blocked, "policy") }
	r.egress = eg
	ctx, cancel := context.WithTimeout(context.Background(), r.startLimit)
	defer cancel()
	b, err := startBrowser(ctx, &r.cfg, eg)
	if err != nil {
		eg.close()
		return nil, err
	}
	b.cacheClearedAt = r.now() // a new profile: its cache is empty
	r.cur = b
	return r, nil
}

// resourceType is the protocol's name of a render.chrome.block_types entry ("xhr" → "XHR").
func resourceType(t string) network.ResourceType {
	switch t {
	case "xhr":
		return network.ResourceTypeXHR
	case "texttrack":
		return network.ResourceTypeTextTrack
	case "eventsource":
		return network.ResourceTypeEventSource
	case "websocket":
		return network.ResourceTypeWebSocket
	case "signedexchange":
		return network.ResourceTypeSignedExchange
	case "cspviolationreport":
		return network.ResourceTypeCSPViolationReport
	}
	return network.ResourceType(strings.ToUpper(t[:1]) + t[1:])
}

func (r *Renderer) count(f func(string), reason string) {
	if f != nil {
		f(reason)
	}
}

// Close stops the renderer: no render begins on it any more, the renders running on it finish
// (each within render.timeout), then the browser is killed with its process group, its profile
// removed, and the proxy stopped. Safe to call twice; the second call returns at once.
func (r *Renderer) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	if b := r.cur; b != nil {
		r.cur = nil
		b.retired = true
		if b.inflight == 0 {
			r.closeLater(b)
		}
	}
	r.mu.Unlock()
	// A browser retired with renders on it is closed by the last of them (release).
	r.renders.Wait()
	r.closing.Wait()
	r.egress.close()
	return nil
}

// RSS is the resident memory of the current browser's processes, in bytes (0 when none runs).
func (r *Renderer) RSS() int64 {
	r.mu.Lock()
	b := r.cur
	r.mu.Unlock()
	if b == nil {
		return 0
	}
	return b.rss()
}

// Restarts is how many browsers were retired for a new one.
func (r *Renderer) Restarts() int64 { return r.restarts.Load() }

// errClosed is a render on a renderer that was closed (a reload replaced it, or the worker stops).
var errClosed = errors.New("the chrome renderer is closed")

// acquire returns the browser a render runs on, starting one if none runs (the first render
// after a crash or a recycle waits for it), and counts the render on it.
func (r *Renderer) acquire(ctx context.Context) (*browser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errClosed
	}
	if r.cur != nil && !r.cur.alive() {
		r.retireLocked(r.cur, "crash")
	}
	if r.cur == nil {
		sctx, cancel := context.WithTimeout(ctx, r.startLimit)
		b, err := startBrowser(sctx, &r.cfg, r.egress)
		cancel()
		if err != nil {
			return nil, err
		}
		b.cacheClearedAt = r.now()
		r.cur = b
	}
	b := r.cur
	b.renders++
	b.inflight++
	r.renders.Add(1)
	if b.renders >= r.cfg.RecycleAfter {
		r.retireLocked(b, "recycle")
	}
	return b, nil
}

// retireLocked takes b out of service: no render begins on it, and it closes once the renders
// on it have ended. r.mu is held.
func (r *Renderer) retireLocked(b *browser, reason string) {
	if b.retired {
		return
	}
	b.retired = true
	if r.cur == b {
		r.cur = nil
	}
	r.restarts.Add(1)
	r.count(r.hooks.Restarted, reason)
	if b.inflight == 0 {
		r.closeLater(b)
	}
}

func (r *Renderer) closeLater(b *browser) {
	r.closing.Add(1)
	go func() {
		defer r.closing.Done()
		b.close()
	}()
}

// release ends a render on b; a retired browser closes after its last render, and now and then
// the browser's memory is looked at.
func (r *Renderer) release(b *browser) {
	defer r.renders.Done()
	r.mu.Lock()
	b.inflight--
	if b.retired && b.inflight == 0 {
		r.closeLater(b)
	}
	r.mu.Unlock()
	now := time.Now().UnixNano()
	last := r.rssCheckedAt.Load()
	if now-last < int64(rssEvery) || !r.rssCheckedAt.CompareAndSwap(last, now) {
		return
	}
	r.renders.Add(1) // Close waits for the look, as for a render
	go func() {
		defer r.renders.Done()
		if rss := b.rss(); rss > r.cfg.MaxRSS {
			r.mu.Lock()
			r.retireLocked(b, "rss")
			r.mu.Unlock()
		}
	}()
}

// Render renders req.URL in a new tab of the browser. See the package doc.
func (r *Renderer) Render(ctx context.Context, req render.Request) (res render.Result) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	defer render.Recovered(&res, start)
	res.FinalURL = req.URL

	u, err := url.Parse(req.URL)
	switch {
	case err != nil:
		return failed(res, outcome.Failed, render.StageRequest, "bad URL: "+err.Error())
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return failed(res, outcome.Failed, render.StageRequest, fmt.Sprintf("bad URL: want http(s)://host/…, got scheme %q host %q", u.Scheme, u.Host))
	case !render.Allowed(r.cfg.Domains, u.Host):
		return failed(res, outcome.Blocked, render.StagePolicy, fmt.Sprintf("host %q is not in render.domains", u.Hostname()))
	}
	timeout := r.cfg.Timeout
	rctx, cancel := render.WithTimeout(ctx, timeout)
	defer cancel()
	b, err := r.acquire(rctx)
	if err != nil {
		if rctx.Err() != nil {
			return failed(res, outcome.Timeout, render.StageBrowser, render.TimeoutText(rctx, timeout, render.StageBrowser))
		}
		return failed(res, outcome.Failed, render.StageBrowser, err.Error())
	}
	defer r.release(b)
	base := res
	clearFirst, gen := r.cacheClear(b, req.CacheEpoch)
	t := &tab{r: r, b: b, req: req, dev: r.device(req.Device), start: start, clearCache: clearFirst, allow: r.allowanceFor(req.URL)}
	res = t.render(rctx, base)
	if !t.secondLook(rctx, res) {
		return res
	}
	// The page looked wrong, and some of its scripts or styles came from the browser's cache:
	// perhaps the site deployed new ones under the same URLs and the cache still holds the old.
	// Look again with the cache bypassed, within the same render.timeout, and take that look —
	// unless the site's last second look since the cache was cleared found this very result
	// again: the cache did not explain it then (a site that throws, or keeps a long-poll
	// pending, on every load), and a second render would only double the cost of every render of it.
	site := siteOf(r.cfg.Domains, u)
	if r.skipSecondLook(b, site, wrongOf(res)) {
		return res
	}
	cold := &tab{r: r, b: b, req: req, dev: t.dev, start: start, cold: true, allow: t.allow}
	out := cold.render(rctx, base)
	r.noteSecondLook(b, gen, site, res, out)
	return out
}

// secondLook reports whether a completed render looks wrong — its status (the document's, or
// the one the page declared) is 400–599, or its scripts threw, or its own data requests failed
// or were still pending — while some of its sub-resources came from the browser's cache.
func (t *tab) secondLook(rctx context.Context, res render.Result) bool {
	sig := res.Signals
	if t.cold || sig == nil || rctx.Err() != nil || !t.b.alive() {
		return false
	}
	t.mu.Lock()
	cached := t.cachedSub
	t.mu.Unlock()
	wrong := (res.Status >= 400 && res.Status <= 599) || sig.Exceptions > 0 || sig.FailedRequests > 0 || sig.PendingRequests > 0
	return wrong && cached
}

// cacheClear reports whether the render about to begin on b clears the browser's cache first,
// and if so counts it cleared: when it was last cleared longer ago than
// render.chrome.cache_max_age, or when the request carries a cache epoch above the last one it
// was cleared at (an operator's recache or rush). One render clears it; the others do not wait.
// A clear forgets what second looks found (secondlook.go) and the long-polls renders found
// (netidle.LongPolls); gen is the cache's generation the
// render runs in.
func (r *Renderer) cacheClear(b *browser, epoch uint64) (clearFirst bool, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	stale := r.cfg.CacheMaxAge > 0 && now.Sub(b.cacheClearedAt) > r.cfg.CacheMaxAge
	if !stale && epoch <= r.cacheEpoch && !b.clearAgain {
		return false, b.cacheGen
	}
	b.cacheClearedAt, b.clearAgain = now, false
	b.cacheGen++
	b.looks = nil
	b.polls.Clear()
	r.cacheEpoch = max(r.cacheEpoch, epoch)
	return true, b.cacheGen
}

// cacheClearFailed makes the next render on b clear the cache, since this one could not.
func (r *Renderer) cacheClearFailed(b *browser) {
	r.mu.Lock()
	b.clearAgain = true
	r.mu.Unlock()
}

// device is the emulation of a device name (Options.Devices).
func (r *Renderer) device(name string) Device { return r.cfg.device(name) }

func failed(res render.Result, o outcome.Outcome, stage, msg string) render.Result {
	res.Outcome, res.Stage, res.Err, res.Body = o, stage, msg, nil
	return res
}

// pattern is a render.chrome.block entry: * matches any run of characters, everything else
// itself, against the whole URL.
type pattern []string

func compilePattern(p string) pattern { return strings.Split(p, "*") }

func (p pattern) match(s string) bool {
	if len(p) == 1 {
		return s == p[0]
	}
	if !strings.HasPrefix(s, p[0]) {
		return false
	}
	s = s[len(p[0]):]
	for _, part := range p[1 : len(p)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return strings.HasSuffix(s, p[len(p)-1])
}
