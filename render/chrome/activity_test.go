package chrome

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
		a := newActivity()
		if order == "sent, finished" {
			a.sent("1.1", network.ResourceTypeScript, t0)
			a.end("1.1", t0)
		} else {
			a.end("1.1", t0)
			a.sent("1.1", network.ResourceTypeScript, t0)
		}
		if a.quiet(t0.Add(idle/2), idle, long) {
			t.Errorf("%s: quiet %s after the last event, before render.chrome.idle", order, idle/2)
		}
		if !a.quiet(t0.Add(idle), idle, long) {
			t.Errorf("%s: not quiet after render.chrome.idle: in flight %v", order, a.inflight)
		}
	}
}

// A redirect is the same request sent again: it stays in flight until it ends, once.
func TestActivityRedirectIsOneRequest(t *testing.T) {
	const idle, long = 500 * time.Millisecond, 2 * time.Second
	t0 := time.Unix(1000, 0)
	a := newActivity()
	a.sent("7", network.ResourceTypeDocument, t0)
	a.sent("7", network.ResourceTypeDocument, t0.Add(100*time.Millisecond))
	if a.quiet(t0.Add(time.Second), idle, long) {
		t.Fatal("quiet with the redirected document in flight")
	}
	a.end("7", t0.Add(time.Second))
	if !a.quiet(t0.Add(time.Second+idle), idle, long) {
		t.Fatalf("not quiet after the redirected document ended: %v", a.inflight)
	}
}

// A request in flight for longer than render.chrome.long_request (a long-poll) no longer holds
// the page; a younger one does; an EventSource or a WebSocket never does.
func TestActivityLongRequests(t *testing.T) {
	const idle, long = 500 * time.Millisecond, 2 * time.Second
	t0 := time.Unix(1000, 0)
	a := newActivity()
	a.sent("poll", network.ResourceTypeXHR, t0)
	if a.quiet(t0.Add(idle), idle, long) {
		t.Error("quiet while the young request is in flight")
	}
	if a.quiet(t0.Add(long), idle, long) {
		t.Error("quiet at exactly render.chrome.long_request")
	}
	if !a.quiet(t0.Add(long+time.Millisecond), idle, long) {
		t.Error("the long request still holds the page past render.chrome.long_request")
	}
	a.sent("data", network.ResourceTypeFetch, t0.Add(long))
	if a.quiet(t0.Add(long+idle+time.Millisecond), idle, long) {
		t.Error("quiet while a young fetch is in flight beside the long request")
	}

	b := newActivity()
	b.sent("es", network.ResourceTypeEventSource, t0)
	b.sent("ws", network.ResourceTypeWebSocket, t0)
	if !b.quiet(t0.Add(idle), idle, long) {
		t.Errorf("an EventSource or a WebSocket holds the page: %v", b.inflight)
	}
}
