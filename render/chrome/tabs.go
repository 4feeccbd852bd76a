package chrome

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// tabConn is a tab kept open between renders. Opening one costs more than a trivial render
// (Chromium creates a target and, for most, a renderer process; chromedp attaches and enables
// its domains: 140–290 ms on two busy cores), so a browser keeps its tabs: a render borrows
// an idle one, or opens one when none is idle (at most render.concurrency exist, as many as
// renders run at once), and gives it back parked on about:blank, so that nothing of its page
// runs or loads while it waits and nothing of it reaches the next render's events. A tab that
// crashed, or whose render did not end cleanly (a timeout may leave a navigation hanging), is
// closed instead. The domains a render watches (Inspector, Fetch, Network, Page) are enabled
// once, when the tab opens; each render sets the device's emulation anew.
type tabConn struct {
	ctx    context.Context // the tab's chromedp context, a child of the browser's
	cancel context.CancelFunc
	target *chromedp.Target
	dead   atomic.Bool // it crashed or was detached, perhaps while it waited

	// The emulation the tab has (tab.emulate), used by one render at a time.
	dev    Device
	devSet bool
}

// openTab opens a tab on b, bounded by ctx.
func openTab(ctx context.Context, b *browser) (*tabConn, error) {
	c := &tabConn{}
	c.ctx, c.cancel = chromedp.NewContext(b.ctx, chromedp.WithListener(func(ev any) {
		switch ev.(type) {
		case *inspector.EventTargetCrashed, *inspector.EventDetached:
			c.dead.Store(true)
		}
	}))
	opened := make(chan error, 1)
	go func() { opened <- chromedp.Do(c.ctx) }() // the first Do opens the tab, tied to c.ctx
	var err error
	select {
	case err = <-opened:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.target = chromedp.FromContext(c.ctx).Target
	for _, enable := range []func() error{
		func() error { _, err := cdp.Call(ctx, c.target, inspector.Enable, cdp.Empty{}); return err },
		func() error {
			// Challenges are paused too: the egress proxy asks for the browser's credentials.
			handleAuth := true
			_, err := cdp.Call(ctx, c.target, fetch.Enable, fetch.EnableParams{HandleAuthRequests: &handleAuth,
				Patterns: []*fetch.RequestPattern{{URLPattern: "*", RequestStage: fetch.RequestStageRequest}}})
			return err
		},
		func() error { _, err := cdp.Call(ctx, c.target, network.Enable, network.EnableParams{}); return err },
		func() error { _, err := cdp.Call(ctx, c.target, page.Enable, page.EnableParams{}); return err },
	} {
		if err := enable(); err != nil {
			c.cancel()
			return nil, err
		}
	}
	return c, nil
}

// parkTimeout bounds a tab's move to about:blank after its render; a tab that takes longer is
// closed rather than kept.
const parkTimeout = 2 * time.Second

// park moves the tab to about:blank and waits until the blank document is committed: its page
// has stopped, its requests are cancelled. The page itself is made to go (location.replace),
// not the browser (Page.navigate): a blank document the page opens stays in the page's
// renderer process, so the next render of the same site reuses that process, where a
// browser-initiated about:blank swaps processes twice a render (park 30 ms against 125–150 ms,
// and the next navigation 40 ms against 65–85 ms, measured). A page that refuses to go (a busy
// script, a beforeunload prompt) is not parked within parkTimeout, and its tab is closed. It
// reports whether the tab is fit for reuse.
func (c *tabConn) park(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, parkTimeout)
	defer cancel()
	navigated := cdp.Events(ctx, c.target, page.FrameNavigated) // subscribed before it goes
	if _, err := chromedp.Evaluate[any](`location.replace("about:blank")`)(ctx, c.target); err != nil {
		return false
	}
	for ev, err := range navigated {
		if err != nil {
			return false
		}
		if ev.Frame != nil && ev.Frame.ParentID == "" && ev.Frame.URL == "about:blank" {
			return !c.dead.Load()
		}
	}
	return false
}

// borrow returns an idle tab of b, or opens one; reused says which.
func (r *Renderer) borrow(ctx context.Context, b *browser) (c *tabConn, reused bool, err error) {
	for {
		r.mu.Lock()
		if len(b.idle) == 0 {
			r.mu.Unlock()
			break
		}
		c = b.idle[len(b.idle)-1]
		b.idle = b.idle[:len(b.idle)-1]
		r.mu.Unlock()
		if !c.dead.Load() {
			return c, true, nil
		}
		c.cancel()
	}
	c, err = openTab(ctx, b)
	return c, false, err
}

// giveBack returns a tab to b's idle tabs when its render left it clean (parked) and b is
// still in service; otherwise it closes the tab before the render returns, as a tab that is
// not reused always was: closing one that crashed while the next opens has stalled the next.
func (r *Renderer) giveBack(b *browser, c *tabConn, clean bool) {
	r.mu.Lock()
	keep := clean && !c.dead.Load() && !b.retired && b.alive()
	if keep {
		b.idle = append(b.idle, c)
	}
	r.mu.Unlock()
	if !keep {
		c.cancel()
	}
}
