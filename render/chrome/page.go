package chrome

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/render/chrome/netidle"
)

// pollEvery is how often a render looks at window.prerenderReady and the network while it
// waits for the page to be ready.
const pollEvery = 20 * time.Millisecond

// readyState reads the page's own readiness: 0 it does not define prerenderReady, 1 it does
// and it is not true yet, 2 it is true.
const readyState = `typeof window.prerenderReady === "undefined" ? 0 : (window.prerenderReady === true ? 2 : 1)`

// captureScript serializes the document after readiness, first removing its <script> elements
// (all but JSON-LD data, which is content) unless render.chrome.keep_scripts. The tab is closed
// afterwards, so changing its DOM changes nothing else.
const captureScript = `(() => {
  if (!%t) {
    for (const s of Array.from(document.querySelectorAll("script"))) {
      if ((s.getAttribute("type") || "").trim().toLowerCase() !== "application/ld+json") s.remove();
    }
  }
  const dt = document.doctype ? new XMLSerializer().serializeToString(document.doctype) : "";
  return dt + (document.documentElement ? document.documentElement.outerHTML : "");
})()`

// tab is one render: a new tab of the browser, its requests vetted before they are sent, its
// network watched for idleness, its document's response noted.
type tab struct {
	r     *Renderer
	b     *browser
	req   render.Request
	dev   Device
	start time.Time
	allow *allowance // what render.chrome.allow lets the page load despite a block; nil: nothing

	mainFrame cdp.FrameID
	crashed   chan struct{}
	loaded    chan struct{}

	mu         sync.Mutex
	net        *netidle.Activity // the page's requests, for network idleness
	committed  bool              // the main frame has committed this render's document
	docStatus  int
	docHeaders network.Headers
	docRequest network.RequestID // the document's request, whose raw body a non-HTML one is
	docURL     string
	docEgress  string // the proxy's egressHeader on the document's response
	refusedDoc string // a document (or redirect) URL refused by render.domains or its scheme
	docHops    map[string]bool
	loop       string // why the main document's redirects were stopped
	blocked    int
	proxyAuth  map[fetch.RequestID]bool // requests whose proxy challenge was answered once
	timings    render.Timings

	// What the page showed besides its document (render.Signals), under mu.
	cold       bool                         // a second look with the browser's cache bypassed (Renderer.Render)
	clearCache bool                         // the browser's cache is cleared before navigating (Renderer.cacheClear)
	exceptions int                          // uncaught exceptions of the page's scripts
	failed     int                          // the page's own data requests that failed
	data       map[network.RequestID]string // the page's own data requests (XHR, fetch to its site) → URL
	dataAny    bool                         // the page asked any site for data (XHR, fetch, EventSource)
	failedIDs  map[network.RequestID]bool   // those counted as failed, once each
	evidence   []string                     // the first lines of evidence, at most render.MaxEvidence
	cachedSub  bool                         // a sub-resource was answered from the browser's cache
}

func (t *tab) since() time.Duration { return time.Since(t.start) }

// render runs the render in a tab of the browser, borrowed and given back (tabs.go); ctx
// carries render.timeout.
func (t *tab) render(ctx context.Context, res render.Result) render.Result {
	t.crashed, t.loaded = make(chan struct{}), make(chan struct{})
	t.net, t.docHops, t.proxyAuth = netidle.NewActivity(), map[string]bool{}, map[fetch.RequestID]bool{}
	t.data, t.failedIDs, t.dataAny = map[network.RequestID]string{}, map[network.RequestID]bool{}, false
	c, err := t.tabFor(ctx)
	if err != nil {
		return t.classifyErr(ctx, res, err)
	}
	if err := t.prepareCache(ctx, c); err != nil {
		t.r.giveBack(t.b, c, false)
		return t.classifyErr(ctx, res, err)
	}
	out, clean := t.run(ctx, c, res)
	if t.cold && clean {
		// The tab goes back to the cache it shares with every other render.
		_, err := cdp.Call(ctx, c.target, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: false})
		clean = err == nil
	}
	t.r.giveBack(t.b, c, clean)
	return out
}

// prepareCache clears the browser's cache before the render when the renderer asked it to
// (render.chrome.cache_max_age, a cache epoch), and turns the cache off on the tab for a
// second look (tab.cold). Clearing is the browser's, through whichever tab asks.
func (t *tab) prepareCache(ctx context.Context, c *tabConn) error {
	if t.clearCache {
		if _, err := cdp.Call(ctx, c.target, network.ClearBrowserCache, cdp.Empty{}); err != nil {
			t.r.cacheClearFailed(t.b)
			return fmt.Errorf("clearing the browser's cache: %w", err)
		}
	}
	if t.cold {
		if _, err := cdp.Call(ctx, c.target, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
			return fmt.Errorf("bypassing the browser's cache: %w", err)
		}
	}
	return nil
}

// tabFor borrows a tab and sets the device's emulation on it. A borrowed tab that fails that
// (it crashed while it waited, before it told) is closed, and the next one taken.
func (t *tab) tabFor(ctx context.Context) (*tabConn, error) {
	for {
		c, reused, err := t.r.borrow(ctx, t.b)
		if err != nil {
			return nil, err
		}
		if err = t.emulate(ctx, c); err == nil {
			return c, nil
		}
		t.r.giveBack(t.b, c, false)
		if !reused || ctx.Err() != nil {
			return nil, err
		}
	}
}

// classifyErr names a failure of the tab itself (it could not open, or the browser went away).
func (t *tab) classifyErr(ctx context.Context, res render.Result, err error) render.Result {
	timeout := t.r.cfg.Timeout
	switch {
	case ctx.Err() != nil:
		return failed(res, outcome.Timeout, render.StageBrowser, render.TimeoutText(ctx, timeout, render.StageBrowser))
	case !t.b.alive():
		return failed(res, outcome.Failed, render.StageBrowser, "the browser exited: "+err.Error())
	}
	return failed(res, outcome.Failed, render.StageBrowser, "tab: "+err.Error())
}

// run is the render inside the tab c: ctx is the render's (render.timeout, the caller's).
// clean says the tab is parked and fit for the next render.
func (t *tab) run(rctx context.Context, c *tabConn, res render.Result) (_ render.Result, clean bool) {
	target := c.target
	t.mainFrame = cdp.FrameID(target.TargetID)
	// A crashed tab answers no command: every call made from here ends with the crash.
	ctx, endOnCrash := context.WithCancel(rctx)
	defer endOnCrash()
	// The listener's context is the tab's (chromedp's), ended with the render.
	evCtx, stopEvents := context.WithCancel(c.ctx)
	stop := context.AfterFunc(ctx, stopEvents)
	defer stop()
	var events sync.WaitGroup
	defer func() { stopEvents(); events.Wait() }()
	listen := func(f func()) {
		events.Add(1)
		go func() { defer events.Done(); f() }()
	}
	// Subscribe before navigating, so that no event is missed. The Network and Page events are
	// handled where chromedp reads them, one at a time in the order the browser sent them
	// (onEvent): a request's end can never be handled before its start. Answering a paused
	// request is a command, which cannot be sent from there: those events have a goroutine.
	if err := chromedp.Listen(evCtx, t.onEvent); err != nil {
		return t.finish(rctx, t.fail(rctx, res, render.StageBrowser, err)), false
	}
	paused := cdp.Events(evCtx, target, fetch.RequestPaused)
	challenges := cdp.Events(evCtx, target, fetch.AuthRequired)
	crashes := cdp.Events(evCtx, target, inspector.TargetCrashed)
	listen(func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			t.vet(evCtx, target, &ev)
		}
	})
	listen(func() {
		for ev, err := range challenges {
			if err != nil {
				return
			}
			t.answerChallenge(evCtx, target, &ev)
		}
	})
	listen(func() {
		for _, err := range crashes {
			if err == nil {
				close(t.crashed)
				endOnCrash()
			}
			return
		}
	})
	out := t.navigateAndCapture(ctx, rctx, target, res)
	// Parked while its events are still heard: nothing of this page reaches the next render.
	return out, rctx.Err() == nil && !t.isCrashed() && c.park(rctx)
}

func (t *tab) isCrashed() bool {
	select {
	case <-t.crashed:
		return true
	default:
		return false
	}
}

// navigateAndCapture loads the page in the tab, waits until it is ready and captures it.
func (t *tab) navigateAndCapture(ctx, rctx context.Context, target *chromedp.Target, res render.Result) render.Result {
	nav, err := cdp.Call(ctx, target, page.Navigate, page.NavigateParams{URL: t.req.URL})
	t.mu.Lock()
	t.timings.Response = t.since()
	t.mu.Unlock()
	if err != nil {
		return t.finish(rctx, t.fail(rctx, res, render.StageNavigate, err))
	}
	if nav.ErrorText != "" || nav.IsDownload {
		if strings.Contains(nav.ErrorText, "ERR_ABORTED") {
			t.awaitCrash(ctx)
		}
		return t.finish(rctx, t.navigationFailed(res, nav))
	}
	if r, ok := t.waitReady(ctx, rctx, target, res); !ok {
		return t.finish(rctx, r)
	}
	if r, ok := t.passThrough(ctx, rctx, target, res); ok {
		return t.finish(rctx, r)
	}
	body, err := chromedp.Evaluate[string](fmt.Sprintf(captureScript, t.r.cfg.KeepScripts))(ctx, target)
	if err != nil {
		return t.finish(rctx, t.fail(rctx, res, render.StageBody, err))
	}
	t.mu.Lock()
	t.timings.Captured = t.since()
	t.mu.Unlock()
	return t.finish(rctx, t.judge(res, body))
}

// emulate sets the device's emulation on the tab: the viewport and scale, touch (on for a
// mobile device) and the user agent. A tab is reused, so each is set whenever it differs from
// what the tab has, and only then: turning touch emulation on or off costs 80–150 ms.
func (t *tab) emulate(ctx context.Context, c *tabConn) error {
	d, was := t.dev, c.dev
	if c.devSet && d.Width == was.Width && d.Height == was.Height && d.Scale == was.Scale && d.Mobile == was.Mobile && d.UserAgent == was.UserAgent {
		return nil
	}
	if !c.devSet || d.Width != was.Width || d.Height != was.Height || d.Scale != was.Scale || d.Mobile != was.Mobile {
		if _, err := cdp.Call(ctx, c.target, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: int64(d.Width), Height: int64(d.Height), DeviceScaleFactor: d.Scale, Mobile: d.Mobile,
			ScreenWidth: int64(d.Width), ScreenHeight: int64(d.Height)}); err != nil {
			return err
		}
	}
	if d.Mobile != was.Mobile { // a new tab has no touch emulation: was.Mobile is false
		p := emulation.SetTouchEmulationEnabledParams{Enabled: d.Mobile}
		if d.Mobile {
			p.MaxTouchPoints = 5
		}
		if _, err := cdp.Call(ctx, c.target, emulation.SetTouchEmulationEnabled, p); err != nil {
			return err
		}
	}
	if !c.devSet || d.UserAgent != was.UserAgent {
		if _, err := cdp.Call(ctx, c.target, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: d.UserAgent}); err != nil {
			return err
		}
	}
	c.dev, c.devSet = d, true
	return nil
}

// vet decides a request before it is sent: documents (the page, its redirects, its frames) must
// be in render.domains and under the redirect bound, every request http(s), and what
// render.chrome.block_types and block name is refused. Addresses are the proxy's to judge.
func (t *tab) vet(ctx context.Context, target *chromedp.Target, ev *fetch.EventRequestPaused) {
	reason := t.refusal(ev)
	if reason == "" {
		p := fetch.ContinueRequestParams{RequestID: ev.RequestID}
		if ev.ResourceType == network.ResourceTypeDocument {
			p.Headers = fromOrigin(ev.Request.Headers)
		}
		_, _ = cdp.Call(ctx, target, fetch.ContinueRequest, p)
		return
	}
	t.mu.Lock()
	t.blocked++
	t.mu.Unlock()
	t.r.count(t.r.hooks.Blocked, reason)
	_, _ = cdp.Call(ctx, target, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
}

// fromOrigin are a document request's headers made to reach the origin: Cache-Control and
// Pragma no-cache, which make Chromium's HTTP cache fetch the response anew rather than answer
// from a stored copy (one kept by heuristic freshness, such as a document with only
// Last-Modified, or a cached permanent redirect) or validate one; and no conditional headers,
// so that the origin sends the whole document. Every hop of a redirect is paused here again,
// so redirects come from the origin too. They carry the render's marker (render.MarkerHeader),
// so that the site's middleware passes them on rather than back to the cache. Only documents (the page, its redirects, its frames):
// sub-resources stay cached between renders, which is most of what a long-lived browser saves.
func fromOrigin(h network.Headers) []*fetch.HeaderEntry {
	out := make([]*fetch.HeaderEntry, 0, len(h)+2)
	for name, v := range h {
		switch strings.ToLower(name) {
		case "cache-control", "pragma", strings.ToLower(render.MarkerHeader), "if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range":
			continue
		}
		if s, ok := v.(string); ok {
			out = append(out, &fetch.HeaderEntry{Name: name, Value: s})
		}
	}
	return append(out, &fetch.HeaderEntry{Name: "Cache-Control", Value: "no-cache"}, &fetch.HeaderEntry{Name: "Pragma", Value: "no-cache"},
		&fetch.HeaderEntry{Name: render.MarkerHeader, Value: render.MarkerValue})
}

// answerChallenge answers the egress proxy's challenge with the browser's own credentials
// (egress.go), once per request: a second challenge of the same request means they were
// refused, and it is cancelled rather than answered in a loop. A site's own challenge (HTTP
// authentication) is cancelled: a prerender has no one to log in.
func (t *tab) answerChallenge(ctx context.Context, target *chromedp.Target, ev *fetch.EventAuthRequired) {
	answer := &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}
	if ev.AuthChallenge != nil && ev.AuthChallenge.Source == fetch.AuthChallengeSourceProxy {
		t.mu.Lock()
		first := !t.proxyAuth[ev.RequestID]
		t.proxyAuth[ev.RequestID] = true
		t.mu.Unlock()
		if first {
			answer = &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseProvideCredentials,
				Username: t.b.proxyUser, Password: t.b.proxyPass}
		}
	}
	_, _ = cdp.Call(ctx, target, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: ev.RequestID, AuthChallengeResponse: answer})
}

func (t *tab) refusal(ev *fetch.EventRequestPaused) string {
	raw := ev.Request.URL
	u, err := url.Parse(raw)
	isDoc := ev.ResourceType == network.ResourceTypeDocument
	main := isDoc && ev.FrameID == t.mainFrame
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || (isDoc && !render.Allowed(t.r.cfg.Domains, u.Host)) {
		if main {
			t.mu.Lock()
			t.refusedDoc = raw
			t.mu.Unlock()
		}
		return "policy"
	}
	if main {
		t.mu.Lock()
		defer t.mu.Unlock()
		switch {
		case t.docHops[raw]:
			t.loop = fmt.Sprintf("redirect loop: back to %s", raw)
		case len(t.docHops) > t.r.cfg.MaxRedirects:
			t.loop = fmt.Sprintf("more than render.max_redirects (%d) redirects", t.r.cfg.MaxRedirects)
		}
		t.docHops[raw] = true
		if t.loop != "" {
			return "policy"
		}
		return ""
	}
	if t.r.blockTypes[ev.ResourceType] && !t.allow.lets(ev.ResourceType, raw, true) {
		return "type"
	}
	for _, p := range t.r.block {
		if p.match(raw) && !t.allow.lets(ev.ResourceType, raw, false) {
			return "pattern"
		}
	}
	return ""
}

// onEvent handles the tab's Network and Page events, in the order the browser sent them, on
// the goroutine that reads them: it must return at once and send no command.
func (t *tab) onEvent(ev any) {
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		t.requestSent(ev)
	case *network.EventLoadingFinished:
		t.requestAnswered(ev.RequestID)
		t.requestEnded(ev.RequestID)
	case *network.EventLoadingFailed:
		t.requestFailed(ev)
		t.requestEnded(ev.RequestID)
	case *network.EventResponseReceived:
		t.responseReceived(ev)
	case *network.EventRequestServedFromCache:
		t.mu.Lock()
		t.cachedSub = true // documents never are: they are fetched with no-cache (fromOrigin)
		t.mu.Unlock()
	case *runtime.EventExceptionThrown:
		t.exceptionThrown(ev)
	case *page.EventFrameNavigated:
		if ev.Frame != nil && ev.Frame.ParentID == "" && ev.Frame.URL != "about:blank" {
			t.mu.Lock()
			t.committed = true
			t.mu.Unlock()
		}
	case *page.EventLoadEventFired:
		// A reused tab's about:blank (where the last render parked it) may tell its load late,
		// after this render began: only the load of this render's document counts.
		t.mu.Lock()
		if t.committed && t.timings.Load == 0 {
			t.timings.Load = t.since()
			close(t.loaded)
		}
		t.mu.Unlock()
	}
}

// requestAnswered forgets a data request's URL as a long-poll when it was one: it was answered
// (netidle.LongPolls).
func (t *tab) requestAnswered(id network.RequestID) {
	t.mu.Lock()
	raw, data := t.data[id]
	t.mu.Unlock()
	if data {
		t.b.polls.Forget(raw)
	}
}

func (t *tab) requestEnded(id network.RequestID) {
	t.mu.Lock()
	t.net.End(id, time.Now())
	t.mu.Unlock()
}

// requestSent notes a request, and whether it is the page's own data request: an XHR or
// fetch of the main frame's document to its site (the document's host, or a host under the
// same render.domains entry). Those hold the page up to render.chrome.data_wait, and their
// failures and those still pending are the render's signals.
func (t *tab) requestSent(ev *network.EventRequestWillBeSent) {
	var raw string
	if ev.Request != nil {
		raw = ev.Request.URL
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, data := t.data[ev.RequestID] // a redirect of a data request stays one
	if ev.Type == network.ResourceTypeXHR || ev.Type == network.ResourceTypeFetch || ev.Type == network.ResourceTypeEventSource {
		t.dataAny = t.dataAny || t.committed
	}
	if !data && (ev.Type == network.ResourceTypeXHR || ev.Type == network.ResourceTypeFetch) && ev.FrameID == t.mainFrame &&
		t.committed && sameSite(t.r.cfg.Domains, ev.DocumentURL, raw) {
		t.data[ev.RequestID] = raw
		data = true
	}
	t.net.Sent(ev.RequestID, ev.Type, data, raw, time.Now())
	if data && t.b.polls.Known(raw) {
		t.net.KnownPoll(ev.RequestID)
	}
}

// sameSite reports whether reqURL is on the site of the document docURL: the same host, or both
// under one render.domains entry (shop.example.com and api.example.com under example.com).
func sameSite(domains []string, docURL, reqURL string) bool {
	d, err1 := url.Parse(docURL)
	u, err2 := url.Parse(reqURL)
	if err1 != nil || err2 != nil || d.Hostname() == "" || u.Hostname() == "" {
		return false
	}
	if strings.EqualFold(d.Hostname(), u.Hostname()) {
		return true
	}
	for _, e := range domains {
		entry := []string{e}
		if render.Allowed(entry, d.Host) && render.Allowed(entry, u.Host) {
			return true
		}
	}
	return false
}

// requestFailed counts a data request of the page that failed on the network: not one freshq
// refused (render.chrome.block, block_types, the address policy) nor one cancelled (by the
// page, or as the tab left it).
func (t *tab) requestFailed(ev *network.EventLoadingFailed) {
	t.mu.Lock()
	raw, data := t.data[ev.RequestID]
	t.mu.Unlock()
	if !data || ev.Canceled || ev.BlockedReason != "" || strings.Contains(ev.ErrorText, "ERR_BLOCKED_BY_CLIENT") {
		return
	}
	if strings.Contains(ev.ErrorText, "ERR_TUNNEL_CONNECTION_FAILED") && t.r.egress.refusedRecently(hostPort(raw), t.start) {
		return // the address policy refused it
	}
	t.failedRequest(ev.RequestID, raw, ev.ErrorText)
}

func (t *tab) failedRequest(id network.RequestID, raw, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failedIDs[id] {
		return
	}
	t.failedIDs[id] = true
	t.failed++
	t.addEvidence("failed request: " + raw + " (" + why + ")")
}

// exceptionThrown counts an uncaught exception of the page's scripts (of this render's document:
// not one of the page the tab held before).
func (t *tab) exceptionThrown(ev *runtime.EventExceptionThrown) {
	msg := "uncaught exception"
	if d := ev.ExceptionDetails; d != nil {
		msg = d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg, _, _ = strings.Cut(d.Exception.Description, "\n") // the message, not the stack
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.committed {
		return
	}
	t.exceptions++
	t.addEvidence("exception: " + msg)
}

// addEvidence keeps a line of evidence, within render.MaxEvidence lines of
// render.MaxEvidenceLen bytes. t.mu is held.
func (t *tab) addEvidence(line string) {
	if len(t.evidence) < render.MaxEvidence {
		t.evidence = append(t.evidence, render.EvidenceLine(line))
	}
}

// signals are what the render saw of the page besides its document, or nil when its document
// never committed (the page never loaded).
func (t *tab) signals() *render.Signals {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.committed {
		return nil
	}
	pending := t.net.PendingData()
	sort.Strings(pending)
	sig := &render.Signals{Exceptions: t.exceptions, FailedRequests: t.failed, PendingRequests: len(pending), Cold: t.cold}
	sig.Evidence = append(sig.Evidence, t.evidence...)
	for _, u := range pending {
		if len(sig.Evidence) >= render.MaxEvidence {
			break
		}
		sig.Evidence = append(sig.Evidence, render.EvidenceLine("pending request: "+u))
	}
	return sig
}

func (t *tab) responseReceived(ev *network.EventResponseReceived) {
	if ev.Response == nil {
		return
	}
	if ev.Type != network.ResourceTypeDocument {
		t.mu.Lock()
		if ev.Response.FromDiskCache || ev.Response.FromPrefetchCache {
			t.cachedSub = true
		}
		raw, data := t.data[ev.RequestID]
		if data && netidle.Streams(header(ev.Response.Headers, "Content-Type")) { // never ends: a long-poll now
			t.net.KnownPoll(ev.RequestID)
			t.b.polls.Learn(raw) // as requestSent asks it, under t.mu
		}
		t.mu.Unlock()
		// A 403 the egress proxy made is the address policy's refusal, not the site's answer.
		if st := int(ev.Response.Status); data && dataLost(st) && header(ev.Response.Headers, egressHeader) != "policy" {
			t.failedRequest(ev.RequestID, raw, fmt.Sprintf("HTTP %d", st))
		}
		return
	}
	if ev.FrameID != t.mainFrame {
		return
	}
	t.mu.Lock()
	t.docStatus, t.docHeaders, t.docURL = int(ev.Response.Status), ev.Response.Headers, ev.Response.URL
	t.docRequest = ev.RequestID
	t.docEgress = header(ev.Response.Headers, egressHeader)
	t.mu.Unlock()
}

// dataLost reports whether a data request's answer says the page's data did not arrive: a 5xx,
// 408 (timed out), 429 (rate limited), or 404 and 410 (a product API answering 404 is the page
// losing its content). Not 401, 403 or another 4xx: a real SPA asks endpoints such as /api/me
// or /api/cart that answer 401 or 403 to a visitor who is not logged in, which a prerender
// never is, on every load; counting them would make every render of such a site suspect.
func dataLost(status int) bool {
	switch status {
	case 404, 408, 410, 429:
		return true
	}
	return status >= 500 && status <= 599
}

// header is a response header's value (names are case-insensitive; HTTP/2's are lowercase).
func header(h network.Headers, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			if s, ok := v.(string); ok {
				return s
			}
		}
	}
	return ""
}

// settleLooks is how many looks into the page (each answered by its main thread, between its
// own tasks) must have come back since the last request began or ended before the settle counts:
// on a busy machine a page's script may not have run for the whole settle, and a request its
// data's answer sets off is told before the look that follows it returns.
const settleLooks = 3

// waitReady waits until the page is ready: prerenderReady true if the page defines it, else
// after the load event either render.chrome.settle once the page's own data requests have been
// answered (netidle.Activity.Settled), or render.chrome.idle without a request in flight (quiet). The
// same-site requests found in flight past render.chrome.data_wait are remembered as long-polls
// (netidle.LongPolls). ok is false when the render ended instead, with its result.
func (t *tab) waitReady(ctx, rctx context.Context, target *chromedp.Target, res render.Result) (render.Result, bool) {
	idle, longRequest, dataWait := t.r.cfg.Idle, t.r.cfg.LongRequest, t.r.cfg.DataWait
	settle := t.r.cfg.Settle
	if settle <= 0 || settle > idle {
		settle = idle
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	now := make(chan time.Time, 1)
	now <- time.Now() // the first look is at once: a page may be ready as it commits
	var lastEvent time.Time
	looks := 0 // since lastEvent
	for {
		select {
		case <-now:
		case <-t.crashed:
			return failed(res, outcome.Failed, render.StageBrowser, "the page's tab crashed"), false
		case <-ctx.Done():
			return t.fail(rctx, res, t.waitStage(), ctx.Err()), false
		case <-t.b.ctx.Done():
			return failed(res, outcome.Failed, render.StageBrowser, "the browser exited"), false
		case <-tick.C:
		}
		state, err := chromedp.Evaluate[int](readyState)(ctx, target)
		if err != nil {
			continue // between documents: look again
		}
		t.mu.Lock()
		if t.net.Last() != lastEvent {
			lastEvent, looks = t.net.Last(), 0
		}
		looks++
		t.mu.Unlock()
		if state == 2 {
			break
		}
		if state == 1 || !t.isLoaded() {
			continue
		}
		at := time.Now()
		t.mu.Lock()
		ready := (t.net.Quiet(at, idle, longRequest, dataWait) && t.since()-t.timings.Load >= idle) ||
			(looks >= settleLooks && t.net.Settled(at, settle, longRequest, dataWait))
		var polls []string
		if ready {
			polls = t.net.Overdue(at, longRequest, dataWait)
		}
		t.mu.Unlock()
		if ready {
			for _, u := range polls {
				t.b.polls.Learn(u)
			}
			break
		}
	}
	t.mu.Lock()
	t.timings.Ready = t.since()
	t.mu.Unlock()
	return res, true
}

func (t *tab) isLoaded() bool {
	select {
	case <-t.loaded:
		return true
	default:
		return false
	}
}

func (t *tab) waitStage() string {
	if t.isLoaded() {
		return render.StageReady
	}
	return render.StageNavigate
}

// fail classifies an error of a step: the render's end, a crash, or the step's own failure.
func (t *tab) fail(rctx context.Context, res render.Result, stage string, err error) render.Result {
	select {
	case <-t.crashed:
		return failed(res, outcome.Failed, render.StageBrowser, "the page's tab crashed")
	default:
	}
	switch {
	case rctx.Err() != nil:
		return failed(res, outcome.Timeout, stage, render.TimeoutText(rctx, t.r.cfg.Timeout, stage))
	case !t.b.alive():
		return failed(res, outcome.Failed, render.StageBrowser, "the browser exited")
	}
	return failed(res, outcome.Failed, stage, err.Error())
}

// crashSettle is how long a render whose navigation was aborted waits for word of a crash: a
// navigation whose renderer process dies is aborted, and the crash is told just after.
const crashSettle = 500 * time.Millisecond

func (t *tab) awaitCrash(ctx context.Context) {
	timer := time.NewTimer(crashSettle)
	defer timer.Stop()
	select {
	case <-t.crashed:
	case <-ctx.Done():
	case <-timer.C:
	}
}

// navigationFailed classifies a navigation that ended without a document.
func (t *tab) navigationFailed(res render.Result, nav page.NavigateResult) render.Result {
	if t.isCrashed() {
		return failed(res, outcome.Failed, render.StageBrowser, "the page's tab crashed")
	}
	t.mu.Lock()
	refused, loop := t.refusedDoc, t.loop
	t.mu.Unlock()
	switch {
	case nav.IsDownload:
		return failed(res, outcome.Failed, render.StageNavigate, "the URL is a download, not a page")
	case loop != "":
		return failed(res, outcome.RedirectLoop, render.StageNavigate, loop)
	case refused != "":
		res.FinalURL = refused
		host := refused
		if u, err := url.Parse(refused); err == nil {
			host = u.Hostname()
		}
		return failed(res, outcome.Blocked, render.StagePolicy, fmt.Sprintf("redirect to host %q, which is not in render.domains (or not http/https)", host))
	case strings.Contains(nav.ErrorText, "ERR_TUNNEL_CONNECTION_FAILED") && t.r.egress.refusedRecently(hostPort(t.req.URL), t.start):
		return failed(res, outcome.Blocked, render.StagePolicy, "host "+hostPort(t.req.URL)+": "+render.ErrAddressPolicy.Error())
	case strings.Contains(nav.ErrorText, "TIMED_OUT"):
		return failed(res, outcome.Timeout, render.StageNavigate, nav.ErrorText)
	}
	return failed(res, outcome.Network, render.StageNavigate, nav.ErrorText)
}

func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// passThrough returns the document as the origin sent it when it is not HTML (an API's JSON, a
// text file): what the browser shows of such a document is a viewer page of its own making,
// which no crawler must get for the URL. ok is false for an HTML document, which is rendered.
func (t *tab) passThrough(ctx, rctx context.Context, target *chromedp.Target, res render.Result) (render.Result, bool) {
	t.mu.Lock()
	status, headers, docURL, id := t.docStatus, t.docHeaders, t.docURL, t.docRequest
	t.mu.Unlock()
	ct := header(headers, "content-type")
	if render.IsHTML(ct) || id == "" {
		return res, false
	}
	if docURL != "" {
		res.FinalURL = docURL
	}
	res.Status = status
	got, err := cdp.Call(ctx, target, network.GetResponseBody, network.GetResponseBodyParams{RequestID: id})
	switch {
	case err != nil:
		return t.fail(rctx, res, render.StageBody, fmt.Errorf("reading the %s document: %w", ct, err)), true
	case int64(len(got.Body)) > t.r.cfg.MaxBody:
		return failed(res, outcome.TooLarge, render.StageBody, fmt.Sprintf("page over render.max_body (%d bytes)", t.r.cfg.MaxBody)), true
	}
	res.Body = got.Body
	res.Headers = map[string]string{"content-type": ct}
	for _, k := range []string{"content-language", "cache-control", "etag", "last-modified"} {
		if v := header(headers, k); v != "" {
			res.Headers[k] = v
		}
	}
	var robots []string
	if v := header(headers, "x-robots-tag"); v != "" {
		robots = strings.Split(v, "\n")
	}
	return render.JudgePage(res, robots), true
}

// judge classifies the captured page.
func (t *tab) judge(res render.Result, body string) render.Result {
	t.mu.Lock()
	status, headers, docURL, egressed, fetched := t.docStatus, t.docHeaders, t.docURL, t.docEgress, t.dataAny
	t.mu.Unlock()
	if docURL != "" {
		res.FinalURL = docURL
	}
	switch egressed {
	case "policy":
		return failed(res, outcome.Blocked, render.StagePolicy, "host "+hostPort(res.FinalURL)+": "+render.ErrAddressPolicy.Error())
	case "dial":
		return failed(res, outcome.Network, render.StageNavigate, "the document could not be fetched")
	}
	if int64(len(body)) > t.r.cfg.MaxBody {
		res.Status = status
		return failed(res, outcome.TooLarge, render.StageBody, fmt.Sprintf("page over render.max_body (%d bytes)", t.r.cfg.MaxBody))
	}
	res.Status, res.Body = status, []byte(body)
	// The page is the serialized DOM, in UTF-8 whatever the response's charset was. The
	// document's validators (etag, last-modified) describe the page only when it asked no site
	// for data: worker 0 keeps them for a conditional GET instead of the next render. A page's
	// data, its own site's or another's (a CMS, a price service), changes under its shell's.
	res.Headers = map[string]string{"content-type": "text/html; charset=utf-8"}
	keep := []string{"content-language", "cache-control", "etag", "last-modified"}
	if fetched {
		keep = keep[:2]
	}
	for _, k := range keep {
		if v := header(headers, k); v != "" {
			res.Headers[k] = v
		}
	}
	var robots []string
	if v := header(headers, "x-robots-tag"); v != "" {
		robots = strings.Split(v, "\n")
	}
	return render.JudgePage(res, robots)
}

// finish adds the render's timings and signals.
func (t *tab) finish(_ context.Context, res render.Result) render.Result {
	res.Signals = t.signals()
	t.mu.Lock()
	tm := t.timings
	tm.Blocked = t.blocked
	t.mu.Unlock()
	res.Timings = &tm
	return res
}

var _ = errors.New
