package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

// A remote renderer's result is held to what the local renderers produce before anything of it
// is stored: a Location only with a redirect's status, and only an absolute http(s) URL. A 200
// carrying a Location (which the crawler listener would serve beside the page) and a redirect to
// a javascript: URL are refused, 400 naming results[0].headers.location, and nothing of the
// batch is applied; a 301 to an absolute https URL is stored and served with it.
func TestEndToEndRemoteResultLocationIsChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := filepath.Join(t.TempDir(), "remote-location") // the segment is named after it
	os.Mkdir(dir, 0o700)
	seed(t, dir, 1)
	n := startNode(t, dir, 1, "", "") // worker 0 alone: nothing else claims the row
	waitFor(t, "readiness", 60*time.Second, n.ready)
	var claimed wire.RemoteClaimResponse
	waitFor(t, "a job", 30*time.Second, func() bool {
		a := n.call("POST", "/v1/claim", map[string]any{"limit": 1, "renderer": "farm"})
		return a.code == 200 && json.Unmarshal(a.body, &claimed) == nil && len(claimed.Jobs) == 1
	})
	job := claimed.Jobs[0]
	result := func(status int, location string) map[string]any {
		return map[string]any{"results": []wire.Result{{Key: job.Key, Outcome: "ok", Status: status, Lease: job.Lease,
			Headers: map[string]string{"content-type": "text/html", "location": location}, Body: []byte("<!doctype html><p>page</p>")}}}
	}
	for _, tc := range []struct {
		status   int
		location string
	}{
		{http.StatusOK, "https://elsewhere.example/"},
		{http.StatusMovedPermanently, "javascript:alert(1)"},
		{http.StatusFound, "/relative"},
	} {
		a := n.call("POST", "/v1/results", result(tc.status, tc.location))
		if a.code != http.StatusBadRequest || a.field() != "results[0].headers.location" {
			t.Fatalf("a %d result with Location %q: %d %s, want 400 naming results[0].headers.location", tc.status, tc.location, a.code, a.body)
		}
	}
	if a := n.call("GET", "/v1/pages?url="+url.QueryEscape(job.URL), nil); a.code != http.StatusNotFound {
		t.Fatalf("after the refused results the page is %d %s, want nothing stored (404)", a.code, a.body)
	}
	if a := n.call("POST", "/v1/results", result(http.StatusMovedPermanently, "https://elsewhere.example/new")); a.code != 200 || !strings.Contains(string(a.body), `"applied":1`) {
		t.Fatalf("a 301 to an absolute URL: %d %s", a.code, a.body)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get("http://" + n.addr + "/v1/pages?url=" + url.QueryEscape(job.URL))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "https://elsewhere.example/new" {
		t.Fatalf("the stored redirect is served %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}
