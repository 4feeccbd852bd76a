package netidle

import (
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
)

// A request whose end is told before its start (a cache hit: both arrive together) is not in
// flight: the page becomes idle after render.chrome.idle, as when the events come in order.
func TestActivityEndBeforeStart(t *testing.T) {
	const idle, long = 500 * time.Millisecond, 2 * time.Second
	t0 := time.Unix(1000, 0)
	for _, order := range []string{"sent, finished", "finished, sent"} {
		a := NewActivity()
		if order == "sent, finished" {
			a.Sent("1.1", network.ResourceTypeScript, false, "", t0)
			a.End("1.1", t0)
		} else {
			a.End("1.1", t0)
			a.Sent("1.1", network.ResourceTypeScript, false, "", t0)
		}
		if a.Quiet(t0.Add(idle/2), idle, long, long) {
			t.Errorf("%s: quiet %s after the last event, before render.chrome.idle", order, idle/2)
		}
		if !a.Quiet(t0.Add(idle), idle, long, long) {
			t.Errorf("%s: not quiet after render.chrome.idle: in flight %v", order, a.inflight)
		}
	}
}

// A redirect is the same request sent again: it stays in flight until it ends, once.
func TestActivityRedirectIsOneRequest(t *testing.T) {
	const idle, long = 500 * time.Millisecond, 2 * time.Second
	t0 := time.Unix(1000, 0)
	a := NewActivity()
	a.Sent("7", network.ResourceTypeDocument, false, "", t0)
	a.Sent("7", network.ResourceTypeDocument, false, "", t0.Add(100*time.Millisecond))
	if a.Quiet(t0.Add(time.Second), idle, long, long) {
		t.Fatal("quiet with the redirected document in flight")
	}
	a.End("7", t0.Add(time.Second))
	if !a.Quiet(t0.Add(time.Second+idle), idle, long, long) {
		t.Fatalf("not quiet after the redirected document ended: %v", a.inflight)
	}
}

// A request in flight for longer than render.chrome.long_request (a long-poll) no longer holds
// the page; a younger one does; an EventSource or a WebSocket never does.
func TestActivityLongRequests(t *testing.T) {
	const idle, long = 500 * time.Millisecond, 2 * time.Second
	t0 := time.Unix(1000, 0)
	a := NewActivity()
	a.Sent("poll", network.ResourceTypeXHR, false, "", t0)
	if a.Quiet(t0.Add(idle), idle, long, long) {
		t.Error("quiet while the young request is in flight")
	}
	if a.Quiet(t0.Add(long), idle, long, long) {
		t.Error("quiet at exactly render.chrome.long_request")
	}
	if !a.Quiet(t0.Add(long+time.Millisecond), idle, long, long) {
		t.Error("the long request still holds the page past render.chrome.long_request")
	}
	a.Sent("data", network.ResourceTypeFetch, false, "", t0.Add(long))
	if a.Quiet(t0.Add(long+idle+time.Millisecond), idle, long, long) {
		t.Error("quiet while a young fetch is in flight beside the long request")
	}

	b := NewActivity()
	b.Sent("es", network.ResourceTypeEventSource, false, "", t0)
	b.Sent("ws", network.ResourceTypeWebSocket, false, "", t0)
	if !b.Quiet(t0.Add(idle), idle, long, long) {
		t.Errorf("an EventSource or a WebSocket holds the page: %v", b.inflight)
	}
}

// The page's own data request (an XHR or fetch to its site) holds the page past
// render.chrome.long_request, up to render.chrome.data_wait, and is pending until it ends; a
// third party's request beside it holds only until long_request.
func TestActivityDataWait(t *testing.T) {
	const idle, long, data = 500 * time.Millisecond, 2 * time.Second, 10 * time.Second
	t0 := time.Unix(1000, 0)
	a := NewActivity()
	a.Sent("api", network.ResourceTypeFetch, true, "http://site.test/api", t0)
	a.Sent("cdn", network.ResourceTypeXHR, false, "", t0)
	if a.Quiet(t0.Add(3*time.Second), idle, long, data) {
		t.Error("quiet at 3 s with the page's own fetch in flight")
	}
	if a.Quiet(t0.Add(data), idle, long, data) {
		t.Error("quiet at exactly render.chrome.data_wait")
	}
	if got := a.PendingData(); len(got) != 1 || got[0] != "http://site.test/api" {
		t.Errorf("pending data requests %q", got)
	}
	if !a.Quiet(t0.Add(data+time.Millisecond), idle, long, data) {
		t.Error("the page's own request still holds it past render.chrome.data_wait")
	}
	a.End("api", t0.Add(4*time.Second))
	if !a.Quiet(t0.Add(4*time.Second+idle), idle, long, data) || len(a.PendingData()) != 0 {
		t.Errorf("the third party's request held the page past long_request: %v", a.inflight)
	}
}
