package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The hosted prerender service's recache call works as its tools send it: the token in the
// body (prerenderToken) authorizes it on a listener that has an admin token, and a recache
// that names no device re-renders the page for every device the site renders, so the mobile
// crawler gets the new content too. A wrong prerenderToken is refused like a missing token.
func TestEndToEndRecacheAsTheHostedServiceSendsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	var version atomic.Int64
	version.Store(1)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><title>product</title><p>product name v%d</p>", version.Load())
	}))
	t.Cleanup(origin.Close)
	const admin = "admin-token-for-recache"
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, "token: "+admin+"\n"), "")
	waitFor(t, "ready", 30*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+n.addr+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	page := origin.URL + "/p/1"
	const mobileUA = "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X) Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	for _, ua := range []string{"", mobileUA} {
		var extra []string
		if ua != "" {
			extra = []string{"User-Agent", ua}
		}
		if a := crawl(t, serveAddr, "/"+page, extra...); a.code != http.StatusOK || !strings.Contains(a.body, "v1") {
			t.Fatalf("first crawl (%q): %d %s", ua, a.code, a.body)
		}
	}
	version.Store(2)

	recache := func(body string) (int, string) {
		resp, err := http.Post("http://"+n.addr+"/recache", "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := recache(`{"prerenderToken": "wrong", "url": "` + page + `"}`); code != http.StatusUnauthorized {
		t.Fatalf("a wrong prerenderToken: %d %s, want 401", code, body)
	}
	if code, body := recache(`{"prerenderToken": "` + admin + `", "url": "` + page + `"}`); code != http.StatusOK || !strings.Contains(body, `"rushed":2`) {
		t.Fatalf("recache with the token in the body: %d %s, want 200 rushing both devices", code, body)
	}
	for _, ua := range []string{"", mobileUA} {
		var extra []string
		if ua != "" {
			extra = []string{"User-Agent", ua}
		}
		waitFor(t, "the new content for "+cmpUA(ua), 30*time.Second, func() bool {
			a := crawl(t, serveAddr, "/"+page, extra...)
			return a.code == http.StatusOK && strings.Contains(a.body, "v2")
		})
	}
}

func cmpUA(ua string) string {
	if ua == "" {
		return "desktop"
	}
	return "mobile"
}
