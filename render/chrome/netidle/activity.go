// Package netidle is a page's network as the chrome renderer's readiness sees it: which of its
// requests hold the page and for how long, when its network says it is ready (Quiet after
// render.chrome.idle; Settled once its own data requests have been answered), and the long-poll
// URLs a browser's renders found (LongPolls).
//
// Invariants: a request never counts as in flight after its end was told, in whichever order
// the two arrive; EventSource and WebSocket connections, requests to a known long-poll URL, and
// data requests whose answer's headers say they are a stream (Streams), never hold a page; a same-site data request in flight, a known long-poll included, is always
// reported pending (PendingData), so that what readiness lets go of is never hidden from the
// render's verdict.
package netidle

import (
	"time"

	"github.com/chromedp/cdproto/network"
)

// Activity is a page's network as network idleness sees it: the requests in flight, when each
// began and whether it is the page's own data (an XHR or fetch to its site), and when the last
// one began or ended. A render feeds it every Network event of its tab from one place, in the
// order the browser sent them (the chrome renderer's tab.onEvent); it also remembers the requests that have ended, so
// that an end told before its start (a cache hit's events arrive together) cannot leave a request
// in flight forever. Not safe for concurrent use: the tab's mutex guards it.
type Activity struct {
	inflight map[network.RequestID]flight
	ended    map[network.RequestID]bool // requests that finished or failed
	last     time.Time                  // the last start or end of a request
	answered int                        // the page's own data requests that ended (known long-polls aside)
}

// flight is a request in flight.
type flight struct {
	began time.Time
	data  bool   // the page's own data request: it holds the page up to render.chrome.data_wait
	poll  bool   // a data request to a URL known to be a long-poll (LongPolls): it holds nothing
	url   string // for a data request, the evidence of it pending
}

// NewActivity is a page's network before its first request.
func NewActivity() *Activity {
	return &Activity{inflight: map[network.RequestID]flight{}, ended: map[network.RequestID]bool{}}
}

// neverHold are requests that never end by design (a stream of events, a socket): they do not
// keep a page from being idle, however young.
var neverHold = map[network.ResourceType]bool{network.ResourceTypeEventSource: true, network.ResourceTypeWebSocket: true}

// Sent is a request about to be sent (a redirect of one in flight is the same request). A
// request that has already ended is not in flight again: its end was told first. data says it
// is the page's own data request (an XHR or fetch to its site); url is kept for those.
func (a *Activity) Sent(id network.RequestID, typ network.ResourceType, data bool, url string, now time.Time) {
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

// KnownPoll marks the data request id, in flight, as a long-poll: one to a URL known to be one
// (longpoll.go), or one answered with a stream (Streams). It no longer holds the page, and is
// still reported pending.
func (a *Activity) KnownPoll(id network.RequestID) {
	if f, ok := a.inflight[id]; ok && f.data {
		f.poll = true
		a.inflight[id] = f
	}
}

// End is a request that finished or failed, whether or not its start was told.
func (a *Activity) End(id network.RequestID, now time.Time) {
	a.last = now
	a.ended[id] = true
	if f, ok := a.inflight[id]; ok && f.data && !f.poll {
		a.answered++
	}
	delete(a.inflight, id)
}

// Quiet reports whether the network has been idle for idle at now: no request began or ended
// in that time, and every request still in flight has been so for longer than its bound. A
// page's own data request (an XHR or fetch to its site) is held for up to dataWait
// (render.chrome.data_wait: a slow API is waited for); any other request for up to longRequest
// (render.chrome.long_request: a third party's request, a hanging beacon); past its bound a
// request is taken to be a long-poll or a stream, which would otherwise hold the page until
// render.timeout.
func (a *Activity) Quiet(now time.Time, idle, longRequest, dataWait time.Duration) bool {
	return now.Sub(a.last) >= idle && a.released(now, longRequest, dataWait)
}

// Settled reports whether the page's own data requests say it is ready at now: at least one was
// made and answered, none is in flight but past its bound (a known long-poll holds nothing), no
// other request is in flight but past its bound, and none began or ended within settle
// (render.chrome.settle). A request the answer sets off (the list, then its detail) begins
// within the settle, and holds the page as any other. A page that made no data request has no
// such word from its requests, and waits for render.chrome.idle (Quiet): content its timers add
// makes no request.
func (a *Activity) Settled(now time.Time, settle, longRequest, dataWait time.Duration) bool {
	return a.answered > 0 && now.Sub(a.last) >= settle && a.released(now, longRequest, dataWait)
}

// released reports whether no request in flight holds the page at now: each is a known long-poll
// or has been in flight for longer than its bound.
func (a *Activity) released(now time.Time, longRequest, dataWait time.Duration) bool {
	for _, f := range a.inflight {
		if f.poll {
			continue
		}
		if now.Sub(f.began) <= bound(f, longRequest, dataWait) {
			return false
		}
	}
	return true
}

func bound(f flight, longRequest, dataWait time.Duration) time.Duration {
	if f.data {
		return max(dataWait, longRequest)
	}
	return longRequest
}

// Overdue are the URLs of the page's own data requests in flight for longer than
// render.chrome.data_wait at now, known long-polls aside: the long-polls this render found.
func (a *Activity) Overdue(now time.Time, longRequest, dataWait time.Duration) []string {
	var out []string
	for _, f := range a.inflight {
		if f.data && !f.poll && now.Sub(f.began) > bound(f, longRequest, dataWait) {
			out = append(out, f.url)
		}
	}
	return out
}

// PendingData are the URLs of the page's own data requests still in flight, in no order.
func (a *Activity) PendingData() []string {
	var out []string
	for _, f := range a.inflight {
		if f.data {
			out = append(out, f.url)
		}
	}
	return out
}

// Last is when the last request began or ended.
func (a *Activity) Last() time.Time { return a.last }
