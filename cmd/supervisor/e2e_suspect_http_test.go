package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

// The http renderer runs no scripts, so it gives no signals: a maintenance page the site
// answers with 200 is judged by what it lost of the last good render alone. Through the real
// supervisor and workers: the product page renders and is stored; the site goes into
// maintenance and the page is rushed; the maintenance render is suspect (text_collapsed,
// lost_h1), so the stored page stays the product page, GET /v1/targets says so, GET
// /v1/suspects keeps the maintenance body, /metrics counts it; an operator's accept stores it.
func TestEndToEndAMaintenancePageDoesNotReplaceTheGoodOne(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	product := "<!doctype html><title>Shoe</title><h1>Shoe</h1><p>" + strings.Repeat("A fine leather shoe. ", 30) + "</p>"
	maintenance := "<!doctype html><title>Shoe</title><p>Down for maintenance, back soon.</p>"
	var down atomic.Bool
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if down.Load() {
			fmt.Fprint(w, maintenance)
			return
		}
		fmt.Fprint(w, product)
	}))
	t.Cleanup(origin.Close)
	n := startNode(t, t.TempDir(), 2, `queue: {ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
render: {renderer: http, timeout: 20s, domains: ["127.0.0.1"]}
`, "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	page := origin.URL + "/p/shoe"
	if code := n.post("/v1/targets", map[string]any{"url": page}, nil); code != http.StatusOK {
		t.Fatalf("filing the target: %d", code)
	}
	stored := func() string {
		a := n.do("GET", "/v1/pages?url="+url.QueryEscape(page), "", nil)
		if a.code != http.StatusOK {
			return ""
		}
		return string(a.body)
	}
	waitFor(t, "the product page stored", 60*time.Second, func() bool { return stored() == product })

	down.Store(true)
	n.advanceClock(time.Minute) // past the release grace of its render
	if code := n.post("/v1/prioritize", map[string]any{"url": page, "mode": "rush"}, nil); code != http.StatusOK {
		t.Fatalf("rush: %d", code)
	}
	var ex wire.Explanation
	waitFor(t, "the maintenance render judged", 60*time.Second, func() bool {
		ex, _ = n.explain(page)
		return ex.Verdict != nil && ex.Verdict.Result == "suspect"
	})
	if got := strings.Join(ex.Verdict.Reasons, ","); got != "text_collapsed,lost_h1" || ex.Failures == nil || ex.Failures.Class != "suspect" {
		t.Fatalf("verdict %+v, failures %+v; want text_collapsed,lost_h1 retried as a suspect", *ex.Verdict, ex.Failures)
	}
	if got := stored(); got != product {
		t.Fatalf("the stored page after a suspect render: %.60q, want the product page", got)
	}
	list := n.do("GET", "/v1/suspects?site=127.0.0.1", "", nil)
	if list.code != http.StatusOK || !strings.Contains(string(list.body), `"url":"`+page+`"`) {
		t.Fatalf("GET /v1/suspects: %d %s", list.code, list.body)
	}
	kept := n.do("GET", "/v1/suspects/page?url="+url.QueryEscape(page), "", nil)
	if kept.code != http.StatusOK || string(kept.body) != maintenance {
		t.Fatalf("the kept suspect: %d %q", kept.code, kept.body)
	}
	m := n.metrics()
	if m[`freshq_render_suspect_total{reason="text_collapsed"}`] < 1 || m[`freshq_render_suspect_total{reason="exception"}`] != 0 {
		t.Fatalf("suspect metrics: text_collapsed %v, exception %v", m[`freshq_render_suspect_total{reason="text_collapsed"}`],
			m[`freshq_render_suspect_total{reason="exception"}`])
	}

	if code := n.post("/v1/suspects/accept", map[string]any{"url": page}, nil); code != http.StatusOK {
		t.Fatalf("accept: %d", code)
	}
	if got := stored(); got != maintenance {
		t.Fatalf("the stored page after accept: %.60q, want the maintenance page", got)
	}
	if v := n.metrics()["freshq_render_suspect_accepted_total"]; v != 1 {
		t.Fatalf("freshq_render_suspect_accepted_total %v, want 1", v)
	}
}
