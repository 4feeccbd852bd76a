package chrome

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
)

// delayed answers body after d, or nothing if the request goes away first (or hang closes).
func delayed(d time.Duration, hang <-chan struct{}, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-hang:
			return
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(body))
	}
}

// A page whose own data requests have all been answered is ready once they say so: a short
// settle (render.chrome.settle) after the last of them, not render.chrome.idle of quiet. Its
// content is all there, a request the first answer set off (a list, then its detail) included:
// the settle is measured after the last request of the page, whichever it was. A page that made
// no data request still waits render.chrome.idle (TestReadiness: content a timer adds).
func TestAnsweredDataEndsTheWait(t *testing.T) {
	s := newSite(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	s.mux.HandleFunc("/api/list", delayed(300*time.Millisecond, hang, "7"))
	s.mux.HandleFunc("/api/product/7", delayed(300*time.Millisecond, hang, "Blue kettle, 20 EUR"))
	s.page("/product", `<!doctype html><html><body><div id=app>Loading…</div><script>
fetch("/api/list").then(r => r.text()).then(id => fetch("/api/product/" + id)).then(r => r.text())
  .then(t => { document.getElementById("app").textContent = t })</script></body></html>`)
	const idle = 3 * time.Second // long, so that a wait of it cannot be mistaken for the settle
	r := newRenderer(t, func(c *Options) { c.Idle = idle })
	for i := range 2 { // cold, then warm: the same either way
		res := render1(t, r, render.Request{URL: s.url("/product")})
		if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), "Blue kettle, 20 EUR") || strings.Contains(string(res.Body), "Loading…") {
			t.Fatalf("render %d: %v %s: %.300s", i, res.Outcome, res.Err, res.Body)
		}
		if res.Signals == nil || res.Signals.PendingRequests != 0 {
			t.Errorf("render %d: signals %+v", i, res.Signals)
		}
		if wait := res.Timings.Ready - res.Timings.Load; wait >= idle {
			t.Errorf("render %d: ready %s after the load event: waited render.chrome.idle (%s) after the page's data had answered", i, wait, idle)
		}
	}
}

// A same-site request that outlived render.chrome.data_wait (a long-poll) is remembered by its
// URL without the query: on the next render of the site it holds the page no longer, while it
// is still reported pending (the verdict judges that against the page's last good render), and
// the page's other data requests are still waited for. A remembered URL that is answered is
// forgotten (it was a slow answer, not a long-poll), and so is every one when the browser's
// cache is cleared.
func TestKnownLongPollDoesNotHold(t *testing.T) {
	s := newSite(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	var answerPoll atomic.Bool
	s.mux.HandleFunc("/api/poll", func(w http.ResponseWriter, r *http.Request) {
		if answerPoll.Load() {
			_, _ = w.Write([]byte("{}"))
			return
		}
		delayed(time.Hour, hang, "")(w, r)
	})
	s.mux.HandleFunc("/api/product/7", delayed(2500*time.Millisecond, hang, "Blue kettle, 20 EUR"))
	s.page("/news", `<!doctype html><html><body><h1>News</h1><script>fetch("/api/poll?since=1").catch(() => {})</script></body></html>`)
	s.page("/live", `<!doctype html><html><body><h1>Live</h1><script>fetch("/api/poll?since=2").catch(() => {})</script></body></html>`)
	s.page("/product", `<!doctype html><html><body><div id=app>Loading…</div><script>fetch("/api/poll?since=3").catch(() => {});
fetch("/api/product/7").then(r => r.text()).then(t => { document.getElementById("app").textContent = t })</script></body></html>`)
	const dataWait = 5 * time.Second
	r := newRenderer(t, func(c *Options) {
		c.Timeout = 30 * time.Second
		c.LongRequest = 2 * time.Second
		c.DataWait = dataWait
	})
	var clock atomic.Int64 // render.chrome.cache_max_age passes when the test says
	clock.Store(time.Now().UnixNano())
	r.now = func() time.Time { return time.Unix(0, clock.Load()) }
	type want struct {
		path, body string
		held       bool // the poll held the page until data_wait
	}
	for i, w := range []want{
		{"/news", "<h1>News</h1>", true},           // not known yet: a slow answer, for all the render can tell
		{"/live", "<h1>Live</h1>", false},          // known: another page of the site, another query
		{"/product", "Blue kettle, 20 EUR", false}, // known, while the product's own API is still waited for
	} {
		res := render1(t, r, render.Request{URL: s.url(w.path)})
		if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), w.body) {
			t.Fatalf("%d %s: %v %s: %.300s", i, w.path, res.Outcome, res.Err, res.Body)
		}
		if res.Signals == nil || res.Signals.PendingRequests != 1 || !evidenceHas(res.Signals, "/api/poll") {
			t.Errorf("%d %s: signals %+v, want the poll pending", i, w.path, res.Signals)
		}
		wait := res.Timings.Ready - res.Timings.Load
		if held := wait >= dataWait-300*time.Millisecond; held != w.held {
			t.Errorf("%d %s: ready %s after the load event, held by the poll %v, want %v", i, w.path, wait, held, w.held)
		}
	}

	// Answered once: forgotten, and the next poll that hangs is waited for again.
	answerPoll.Store(true)
	if res := render1(t, r, render.Request{URL: s.url("/news")}); res.Outcome != outcome.OK || res.Signals == nil || res.Signals.PendingRequests != 0 {
		t.Fatalf("answered poll: %v %s, signals %+v", res.Outcome, res.Err, res.Signals)
	}
	answerPoll.Store(false)
	res := render1(t, r, render.Request{URL: s.url("/live")})
	if wait := res.Timings.Ready - res.Timings.Load; res.Outcome != outcome.OK || wait < dataWait-300*time.Millisecond {
		t.Errorf("after the poll was answered: %v, ready %s after load, want held until data_wait", res.Outcome, wait)
	}
	// Known again (that render learnt it); a cleared cache forgets it.
	clock.Add(int64(r.cfg.CacheMaxAge + time.Minute))
	res = render1(t, r, render.Request{URL: s.url("/news")})
	if wait := res.Timings.Ready - res.Timings.Load; res.Outcome != outcome.OK || wait < dataWait-300*time.Millisecond {
		t.Errorf("after the cache was cleared: %v, ready %s after load, want held until data_wait", res.Outcome, wait)
	}
}
