package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// A sitemap files its pages for every device the configuration renders, not for desktop alone:
// a mobile crawler's first visit to a sitemap page finds it known (and rendered), rather than
// being refused as a new page past serve.miss_rate. A run that names a device files that one.
func TestEndToEndSitemapFilesEveryDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	var origin *httptest.Server
	origin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sitemap.xml", "/mobile-sitemap.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
			for i := range 3 {
				fmt.Fprintf(w, "<url><loc>%s%s/p/%d</loc></url>", origin.URL, r.URL.Path[:len(r.URL.Path)-len(".xml")], i)
			}
			fmt.Fprint(w, `</urlset>`)
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<!doctype html><p>%s</p>", r.URL.Path)
		}
	}))
	t.Cleanup(origin.Close)
	n := startNode(t, t.TempDir(), 2, `queue: {ready: {sweep_interval: 1s}}
render: {renderer: http, domains: ["127.0.0.1"]}
`, "")
	waitFor(t, "ready", 30*time.Second, n.ready)

	run := func(body map[string]string) {
		t.Helper()
		a := n.call("POST", "/v1/sitemaps", body)
		var r struct{ ID, Status string }
		if a.code != http.StatusAccepted || json.Unmarshal(a.body, &r) != nil {
			t.Fatalf("POST /v1/sitemaps %v: %d %s", body, a.code, a.body)
		}
		waitFor(t, "the sitemap run", 30*time.Second, func() bool {
			a := n.call("GET", "/v1/sitemaps/"+r.ID, nil)
			return json.Unmarshal(a.body, &r) == nil && r.Status != "running"
		})
		if r.Status != "done" {
			t.Fatalf("the run ended %q", r.Status)
		}
	}
	known := func(u, device string) bool {
		a := n.call("GET", "/v1/targets?url="+url.QueryEscape(u)+"&device="+device, nil)
		if a.code != http.StatusOK && a.code != http.StatusNotFound {
			t.Fatalf("GET /v1/targets %s %s: %d %s", u, device, a.code, a.body)
		}
		return a.code == http.StatusOK
	}

	run(map[string]string{"url": origin.URL + "/sitemap.xml"})
	for i := range 3 {
		u := fmt.Sprintf("%s/sitemap/p/%d", origin.URL, i)
		for _, device := range []string{"desktop", "mobile"} {
			if !known(u, device) {
				t.Errorf("%s is not filed for %s after a sitemap run that named no device", u, device)
			}
		}
	}
	run(map[string]string{"url": origin.URL + "/mobile-sitemap.xml", "device": "mobile"})
	for i := range 3 {
		u := fmt.Sprintf("%s/mobile-sitemap/p/%d", origin.URL, i)
		if !known(u, "mobile") || known(u, "desktop") {
			t.Errorf("%s after a run naming mobile: mobile %v desktop %v, want mobile only", u, known(u, "mobile"), known(u, "desktop"))
		}
	}
}
