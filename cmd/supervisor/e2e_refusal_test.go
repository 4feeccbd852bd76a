package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// A host's refusal, end to end: an origin that answers its first request 429 with
// Retry-After: 60 pauses its host (its site, 127.0.0.1) in the segment every render worker
// reads (until a minute after the refusal, logged as "host paused" by worker 0), and gives the page no strike;
// once the pause has passed (the processes' clock moved a minute on), the page renders, and
// the origin has answered exactly twice.
func TestEndToEndHostRefusalPausesTheHostAndStrikesNoPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	var hits atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!doctype html><p>%s</p>", r.URL.Path)
	}))
	defer origin.Close()
	// Politeness is kept per site: render.domains lists 127.0.0.1 (missYAML), every port of it.
	host := origin.Listener.Addr().(*net.TCPAddr).IP.String()
	n := startNode(t, t.TempDir(), 2, missYAML, "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	page := origin.URL + "/c/p1"
	before := time.Now().UnixMilli()
	var up struct{ Accepted int }
	if code := n.post("/v1/targets", []map[string]any{{"url": page}}, &up); code != http.StatusOK || up.Accepted != 1 {
		t.Fatalf("upsert: %d %+v", code, up)
	}

	seg := n.segment()
	var hs shm.HostState
	waitFor(t, "the host paused", 30*time.Second, func() bool {
		var ok bool
		hs, ok = seg.Hosts().Load(shm.HostHash([]byte(host)))
		return ok && hs.PausedUntilMs != 0
	})
	if hs.PausedUntilMs < before+60_000 || hs.PausedUntilMs > time.Now().UnixMilli()+60_000 || hs.Cause != shm.HostCauseRetryAfter || hs.Status != 429 || hs.Host != host {
		t.Fatalf("host state %+v, want paused a minute from the 429", hs)
	}
	waitFor(t, `worker 0's "host paused" line`, 10*time.Second, func() bool {
		for _, line := range strings.Split(n.log.String(), "\n") {
			if strings.Contains(line, `"message":"host paused"`) && strings.Contains(line, `"host":"`+host+`"`) &&
				strings.Contains(line, `"status":429`) && strings.Contains(line, `"cause":"retry_after"`) {
				return true
			}
		}
		return false
	})
	if ex := explain(t, n, page); ex.Failures != nil {
		t.Fatalf("the refusal struck the page: %+v", ex.Failures)
	}

	n.advanceClock(61 * time.Second)
	waitFor(t, "the page rendered after the pause", 30*time.Second, func() bool {
		return n.do("GET", "/v1/pages?url="+url.QueryEscape(page), "", nil).code == http.StatusOK
	})
	ex := explain(t, n, page)
	if ex.Failures != nil || ex.LastRender == nil || ex.LastRender.Status != 200 {
		t.Fatalf("after the render: failures %+v, last render %+v", ex.Failures, ex.LastRender)
	}
	if h := hits.Load(); h != 2 {
		t.Fatalf("the origin answered %d times, want 2 (the 429, then the page)", h)
	}
}

func explain(t *testing.T, n *node, u string) wire.Explanation {
	t.Helper()
	a := n.do("GET", "/v1/targets?url="+url.QueryEscape(u), "", nil)
	var ex wire.Explanation
	if a.code != http.StatusOK {
		t.Fatalf("explain %s: %d %s", u, a.code, a.body)
	}
	if err := json.Unmarshal(a.body, &ex); err != nil {
		t.Fatalf("explain %s: %v", u, err)
	}
	return ex
}
