package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The crawler listener's and the API's refusals, against the built binaries: each request is
// the one a browser, a script or a crawler sends, and each is measured three ways: the answer
// (status, the field its JSON error names), whether a target was filed (asked of the admin
// API), and whether the origin was fetched (its hit count).

// refused checks, without stopping the test (so that a failing run reports every measurement),
// that a is a JSON error naming field with status code.
func refused(t *testing.T, a apiAnswer, what string, code int, field string) {
	t.Helper()
	var e struct{ Error, Field string }
	if a.code != code || json.Unmarshal(a.body, &e) != nil || e.Error == "" || e.Field != field {
		t.Errorf("%s: %d %s, want %d with a JSON error naming %q", what, a.code, clipped(a.body), code, field)
	}
}

func clipped(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// filed reports whether the admin API knows a target for u: GET /v1/targets?url= answers 200.
// Any other answer (404, or 400 for a URL whose key the store cannot hold) means no target.
func (n *node) filed(u string) bool {
	n.t.Helper()
	return n.do("GET", "/v1/targets?url="+url.QueryEscape(u), "", nil).code == http.StatusOK
}

// longURL is a page of origin whose desktop cache key is size bytes long.
func longURL(origin string, size int) string {
	prefix := origin + "/k/long?x="
	return prefix + strings.Repeat("a", size-len("desktop|")-len(prefix))
}

// A URL whose key is over store.MaxKeyLen (2,048 bytes) but within the listener's 8 KiB bound
// is a bad request naming url: a crawler retries a 503 for ever, and a 400 tells it the URL
// will never be served. Nothing is filed, nothing fetched.
func TestEndToEndCrawlerListenerLongKeyIsABadRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSiteOrigin(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, ""), "")
	waitFor(t, "ready", 30*time.Second, n.ready)

	for _, size := range []int{2049, 4096, 8000} {
		u := longURL(origin.URL, size)
		a := crawl(t, serveAddr, "/"+u)
		var e struct{ Error, Field string }
		if json.Unmarshal([]byte(a.body), &e); a.code != http.StatusBadRequest || e.Field != "url" || e.Error == "" || a.header.Get("Retry-After") != "" {
			t.Errorf("a %d-byte key: %d Retry-After %q %s; want 400 naming url, no Retry-After", size, a.code, a.header.Get("Retry-After"), a.body)
		}
		if n.filed(u) {
			t.Errorf("a %d-byte key was filed", size)
		}
	}
	// The longest key the store holds is served.
	u := longURL(origin.URL, 2048)
	if a := crawl(t, serveAddr, "/"+u); a.code != http.StatusOK || !n.filed(u) {
		t.Fatalf("a 2048-byte key: %d %s", a.code, a.body)
	}
	if h := origin.hitsOf("/k/long"); h != 1 {
		t.Fatalf("the origin was fetched %d times for /k/long, want once (the 2048-byte key)", h)
	}
}

// POST /recache is all or nothing: the whole list is checked first, and one bad URL (its key
// over the store's limit, or its host one render.domains does not name) refuses the request,
// naming urls[i], with nothing filed, rushed or fetched. A host outside render.domains gets
// what POST /v1/pages gets for it: 404.
func TestEndToEndRecacheIsAllOrNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSiteOrigin(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(freePort(t), ""), "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	recache := func(body any) apiAnswer {
		b, _ := json.Marshal(body)
		return n.do("POST", "/recache", string(b), map[string]string{"Content-Type": "application/json"})
	}

	// The report's request: the third URL's key is over the limit.
	a := recache(map[string]any{"urls": []string{origin.URL + "/r/1", origin.URL + "/r/2", longURL(origin.URL, 2049)}})
	refused(t, a, "a long third URL", http.StatusBadRequest, "urls[2]")
	a = recache(map[string]any{"url": longURL(origin.URL, 2049)})
	refused(t, a, "one long URL", http.StatusBadRequest, "url")

	// A host render.domains does not name, as POST /v1/pages refuses it.
	outside := "http://elsewhere.test/r/3"
	refused(t, n.do("POST", "/v1/pages?wait=1s&url="+url.QueryEscape(outside), "", nil), "POST /v1/pages outside render.domains", http.StatusNotFound, "url")
	a = recache(map[string]any{"urls": []string{origin.URL + "/r/4", outside}})
	refused(t, a, "a host outside render.domains in a list", http.StatusNotFound, "urls[1]")
	a = recache(map[string]any{"url": outside})
	refused(t, a, "a host outside render.domains", http.StatusNotFound, "url")

	// A valid list is filed, rushed and rendered.
	a = recache(map[string]any{"urls": []string{origin.URL + "/r/5", origin.URL + "/r/6"}})
	if a.code != http.StatusOK || !strings.Contains(string(a.body), `"rushed":2`) {
		t.Fatalf("a valid list: %d %s", a.code, a.body)
	}
	waitFor(t, "the valid list rendered", 30*time.Second, func() bool { return origin.hitsOf("/r/5") == 1 && origin.hitsOf("/r/6") == 1 })

	for _, p := range []string{"/r/1", "/r/2", "/r/4"} {
		if n.filed(origin.URL+p) || origin.hitsOf(p) != 0 {
			t.Errorf("a refused recache filed (%v) or fetched (%d times) %s", n.filed(origin.URL+p), origin.hitsOf(p), p)
		}
	}
	if n.filed(outside) {
		t.Error("a refused recache filed a host outside render.domains")
	}
}

// An item of POST /v1/targets nested deeper than 32 levels is rejected by its index, and the
// items after it land: the body is still readable JSON, only that item is refused.
func TestEndToEndDeepTargetItemIsRejectedAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n := startNode(t, t.TempDir(), 1, "", "")
	waitFor(t, "ready", 30*time.Second, n.ready)

	deep := strings.Repeat("[", 33) + strings.Repeat("]", 33)
	body := `[{"url": "https://shop.test/d/1"}, {"url": "https://shop.test/d/2", "interval": ` + deep + `}, {"url": "https://shop.test/d/3"}]`
	var resp struct {
		Accepted, Rejected int
		Errors             []struct{ Index int }
		StoppedAt          *int `json:"stopped_at"`
		Error              string
	}
	code := n.post("/v1/targets", body, &resp)
	if code != http.StatusOK || resp.Accepted != 2 || resp.Rejected != 1 || len(resp.Errors) != 1 || resp.Errors[0].Index != 1 || resp.StoppedAt != nil || resp.Error != "" {
		stopped := "none"
		if resp.StoppedAt != nil {
			stopped = fmt.Sprint(*resp.StoppedAt)
		}
		t.Errorf("an upload with a too-deep second item: %d accepted %d rejected %d errors %+v stopped_at %s error %q; want 200, items 0 and 2 accepted, item 1 rejected",
			code, resp.Accepted, resp.Rejected, resp.Errors, stopped, resp.Error)
	}
	for u, want := range map[string]bool{"https://shop.test/d/1": true, "https://shop.test/d/2": false, "https://shop.test/d/3": true} {
		if got := n.filed(u); got != want {
			t.Errorf("%s filed: %v, want %v", u, got, want)
		}
	}
}
