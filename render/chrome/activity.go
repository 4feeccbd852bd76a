package chrome

import (
	"time"

	"github.com/chromedp/cdproto/network"
)

// activity is a page's network as network idleness sees it: the requests in flight, when each
// began and whether it is the page's own data (an XHR or fetch to its site), and when the last
// one began or ended. A render feeds it every Network event of its tab from one place, in the
// order the browser sent them (tab.onEvent); it also remembers the requests that have ended, so
// that an end told before its start (a cache hit's events arrive together) cannot leave a request
// in flight forever. Not safe for concurrent use: the tab's mutex guards it.
type activity struct {
	inflight map[network.RequestID]flight
	ended    map[network.RequestID]bool // requests that finished or failed
	last     time.Time                  // the last start or end of a request
}

// flight is a request in flight.
type flight struct {
	began time.Time
	data  bool   // the page's own data request: it holds the page up to render.chrome.data_wait
	url   string // for a data request, the evidence of it pending
}

func newActivity() *activity {
	return &activity{inflight: map[network.RequestID]flight{}, ended: map[network.RequestID]bool{}}
}

// neverHold are requests that never end by design (a stream of events, a socket): they do not
// keep a page from being idle, however young.
var neverHold = map[network.ResourceType]bool{network.ResourceTypeEventSource: true, network.ResourceTypeWebSocket: true}

// sent is a request about to be sent (a redirect of one in flight is the same request). A
// request that has already ended is not in flight again: its end was told first. data says it
// is the page's own data request (an XHR or fetch to its site); url is kept for those.
func (a *activity) sent(id network.RequestID, typ network.ResourceType, data bool, url string, now time.Time) {
	a.last = now
	if neverHold[typ] || a.ended[id] {
		return
	}
	if _, ok := a.inflight[id]; !ok {
		f := flight{began: now, data: data}
		if data {
			f.url = url
		}
		a.inflight[id] = f
	}
}

// end is a request that finished or failed, whether or not its start was told.
func (a *activity) end(id network.RequestID, now time.Time) {
	a.last = now
	a.ended[id] = true
	delete(a.inflight, id)
}

// quiet reports whether the network has been idle for idle at now: no request began or ended
// in that time, and every request still in flight has been so for longer than its bound. A
// page's own data request (an XHR or fetch to its site) is held for up to dataWait
// (render.chrome.data_wait: a slow API is waited for); any other request for up to longRequest
// (render.chrome.long_request: a third party's request, a hanging beacon); past its bound a
// request is taken to be a long-poll or a stream, which would otherwise hold the page until
// render.timeout.
func (a *activity) quiet(now time.Time, idle, longRequest, dataWait time.Duration) bool {
	if now.Sub(a.last) < idle {
		return false
	}
	for _, f := range a.inflight {
		bound := longRequest
		if f.data {
			bound = max(dataWait, longRequest)
		}
		if now.Sub(f.began) <= bound {
			return false
		}
	}
	return true
}

// pendingData are the URLs of the page's own data requests still in flight, in no order.
func (a *activity) pendingData() []string {
	var out []string
	for _, f := range a.inflight {
		if f.data {
			out = append(out, f.url)
		}
	}
	return out
}
