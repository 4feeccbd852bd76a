package chrome

import (
	"time"

	"github.com/chromedp/cdproto/network"
)

// activity is a page's network as network idleness sees it: the requests in flight, when each
// began, and when the last one began or ended. A render feeds it every Network event of its tab
// from one place, in the order the browser sent them (tab.onEvent); it also remembers the
// requests that have ended, so that an end told before its start (a cache hit's events arrive
// together) cannot leave a request in flight forever. Not safe for concurrent use: the tab's
// mutex guards it.
type activity struct {
	inflight map[network.RequestID]time.Time // request → when it began
	ended    map[network.RequestID]bool      // requests that finished or failed
	last     time.Time                       // the last start or end of a request
}

func newActivity() *activity {
	return &activity{inflight: map[network.RequestID]time.Time{}, ended: map[network.RequestID]bool{}}
}

// neverHold are requests that never end by design (a stream of events, a socket): they do not
// keep a page from being idle, however young.
var neverHold = map[network.ResourceType]bool{network.ResourceTypeEventSource: true, network.ResourceTypeWebSocket: true}

// sent is a request about to be sent (a redirect of one in flight is the same request). A
// request that has already ended is not in flight again: its end was told first.
func (a *activity) sent(id network.RequestID, typ network.ResourceType, now time.Time) {
	a.last = now
	if neverHold[typ] || a.ended[id] {
		return
	}
	if _, ok := a.inflight[id]; !ok {
		a.inflight[id] = now
	}
}

// end is a request that finished or failed, whether or not its start was told.
func (a *activity) end(id network.RequestID, now time.Time) {
	a.last = now
	a.ended[id] = true
	delete(a.inflight, id)
}

// quiet reports whether the network has been idle for idle at now: no request began or ended
// in that time, and every request still in flight has been so for longer than longRequest
// (render.chrome.long_request: a long-poll, a stream, a hanging beacon, which would otherwise
// hold the page until render.timeout).
func (a *activity) quiet(now time.Time, idle, longRequest time.Duration) bool {
	if now.Sub(a.last) < idle {
		return false
	}
	for _, began := range a.inflight {
		if now.Sub(began) <= longRequest {
			return false
		}
	}
	return true
}
