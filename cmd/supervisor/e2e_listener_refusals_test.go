package main

import (
	"encoding/json"
	"fmt"
	"io"
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

// tokenlessServeYAML is a node whose crawler listener is on loopback without serve.tokens, as
// `make run` starts it: only loopback peers are served, and nothing but the peer says who asks.
func tokenlessServeYAML(serveAddr string) string {
	return fmt.Sprintf(`queue: {ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: http
  timeout: 20s
  domains: ["127.0.0.1"]
serve:
  listen: %s
  wait: 20s
`, serveAddr)
}

// askListener sends GET {serveAddr}{rawTarget} with a crawler's User-Agent, the Host header
// host ("" leaves the listener's address) and the given headers, as they are.
func askListener(t *testing.T, serveAddr, rawTarget, host string, headers map[string]string) apiAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+serveAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = rawTarget
	if host != "" {
		req.Host = host
	}
	req.Header.Set("User-Agent", googlebot)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawTarget, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return apiAnswer{resp.StatusCode, resp.Header, b}
}

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

// A page open in a browser on the machine, or a DNS-rebinding page, asks the loopback crawler
// listener for a page: the listener must not file it or fetch the origin for it. Each browser
// request is refused with a JSON error naming the header that gave it away; the middleware's own
// request (the listener's address or localhost in Host, no Origin, no Sec-Fetch-Site), and a
// page the user typed into the address bar (Sec-Fetch-Site: none), are served.
func TestEndToEndCrawlerListenerRefusesBrowsers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSiteOrigin(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, tokenlessServeYAML(serveAddr), "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	port := portOf(serveAddr)

	for _, tc := range []struct {
		name, path, host string
		headers          map[string]string
		code             int
		field            string
	}{
		// The request of the report: a rebinding page, as a cross-site fetch.
		{"rebinding, cross-site", "/b/rebind-cross", "attacker.example",
			map[string]string{"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"}, 421, "Host"},
		// After the rebinding the browser takes the page for same-origin: only Host tells.
		{"rebinding, same-origin", "/b/rebind-same", "attacker.example:" + port,
			map[string]string{"Origin": "http://attacker.example:" + port, "Sec-Fetch-Site": "same-origin"}, 421, "Host"},
		{"rebinding, an image (no Origin)", "/b/rebind-img", "attacker.example:" + port,
			map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, 421, "Host"},
		// A page on another site addresses the listener by its loopback address.
		{"cross-site fetch", "/b/cross-fetch", "",
			map[string]string{"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}, 403, "Sec-Fetch-Site"},
		{"cross-site image", "/b/cross-img", "",
			map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, 403, "Sec-Fetch-Site"},
		{"another local site", "/b/same-site", "localhost:" + port,
			map[string]string{"Origin": "http://localhost:8080", "Sec-Fetch-Site": "same-site"}, 403, "Sec-Fetch-Site"},
		// A browser too old to send Sec-Fetch-Site sends Origin on a cross-origin fetch.
		{"cross-origin fetch, Origin only", "/b/origin-only", "",
			map[string]string{"Origin": "https://attacker.example"}, 403, "Origin"},
	} {
		a := askListener(t, serveAddr, "/"+origin.URL+tc.path, tc.host, tc.headers)
		refused(t, a, tc.name, tc.code, tc.field)
		if n.filed(origin.URL + tc.path) {
			t.Errorf("%s: the refused request filed %s", tc.name, tc.path)
		}
	}

	// Served: what prerender-node sends (the listener's address, no browser header), localhost,
	// and a page the operator typed into the address bar.
	for _, tc := range []struct {
		name, path, host string
		headers          map[string]string
	}{
		{"the middleware", "/b/middleware", "", nil},
		{"localhost", "/b/localhost", "localhost:" + port, nil},
		{"typed by the user", "/b/typed", "", map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}},
	} {
		a := askListener(t, serveAddr, "/"+origin.URL+tc.path, tc.host, tc.headers)
		if a.code != http.StatusOK || a.header.Get("X-Freshq-Cache") != "miss" || !n.filed(origin.URL+tc.path) || origin.hitsOf(tc.path) != 1 {
			t.Errorf("%s: %d %v %s, filed %v, origin hits %d; want 200, a miss, filed, rendered once",
				tc.name, a.code, a.header, a.body, n.filed(origin.URL+tc.path), origin.hitsOf(tc.path))
		}
	}
	// Every refused page is still unfetched, after the served ones were rendered.
	for _, p := range []string{"/b/rebind-cross", "/b/rebind-same", "/b/rebind-img", "/b/cross-fetch", "/b/cross-img", "/b/same-site", "/b/origin-only"} {
		if h := origin.hitsOf(p); h != 0 {
			t.Errorf("the origin was fetched %d times for the refused %s", h, p)
		}
	}
}

// With serve.tokens set, the token says the request is the middleware's, and a browser cannot
// send it: the token is never in a page, and a cross-origin page cannot even add the header
// without a CORS preflight this listener never grants. So a request with the token is served
// whatever its Host and whatever browser headers the middleware forwarded (nginx passes a
// crawler's own request headers on; prerender-node does with forwardHeaders), and one without
// it is refused for the missing token.
func TestEndToEndCrawlerListenerWithATokenServesWhatTheMiddlewareForwards(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSiteOrigin(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, ""), "")
	waitFor(t, "ready", 30*time.Second, n.ready)

	// nginx's recipe sends its upstream's name as Host; a crawler that is a browser came from a
	// search result (cross-site), and nginx forwarded its headers.
	a := askListener(t, serveAddr, "/"+origin.URL+"/t/forwarded", "freshq_serve", map[string]string{
		"X-Prerender-Token": "crawl-token", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Origin": "https://www.google.com"})
	if a.code != http.StatusOK || a.header.Get("X-Freshq-Cache") != "miss" || !n.filed(origin.URL+"/t/forwarded") || origin.hitsOf("/t/forwarded") != 1 {
		t.Fatalf("a token holder's forwarded request: %d %v %s", a.code, a.header, a.body)
	}
	a = askListener(t, serveAddr, "/"+origin.URL+"/t/browser", "attacker.example", map[string]string{
		"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"})
	a.jsonError(t, "a browser without the token", http.StatusUnauthorized, "X-Prerender-Token")
	if n.filed(origin.URL+"/t/browser") || origin.hitsOf("/t/browser") != 0 {
		t.Fatal("a request without the token filed or fetched its page")
	}
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

	// A valid list is filed, rushed and rendered, for both devices (it names none).
	a = recache(map[string]any{"urls": []string{origin.URL + "/r/5", origin.URL + "/r/6"}})
	if a.code != http.StatusOK || !strings.Contains(string(a.body), `"rushed":4`) {
		t.Fatalf("a valid list: %d %s", a.code, a.body)
	}
	waitFor(t, "the valid list rendered", 30*time.Second, func() bool { return origin.hitsOf("/r/5") == 2 && origin.hitsOf("/r/6") == 2 })

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

// visitAs sends GET path to the site with userAgent and the given headers, as a browser that
// a crawler drives, or a person whose browser says it is one, would.
func visitAs(t *testing.T, site, path, userAgent string, headers map[string]string) siteAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, site+path, nil)
	req.Header.Set("User-Agent", userAgent)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return siteAnswer{resp.StatusCode, resp.Header, string(b)}
}

// A crawler's browser that followed a search result: a cross-site navigation.
var crossSiteNavigation = map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", "Sec-Fetch-User": "?1"}

// The middlewares in front of a crawler listener without serve.tokens are never taken for a
// browser, even when the crawler is one: the unmodified prerender-node middleware, without a
// token, sends the listener's address as Host and none of the visitor's headers.
func TestEndToEndPrerenderNodeWithoutTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := npmInstall(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, tokenlessServeYAML(serveAddr), "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	site := expressSite(t, dir, serveAddr, "")

	a := visitAs(t, site, "/p/nt", googlebot, crossSiteNavigation)
	if a.code != 200 || a.header.Get("X-Freshq-Cache") != "miss" || !strings.Contains(a.body, "site page /p/nt for freshq/") {
		t.Fatalf("a crawler through prerender-node: %d %v %q", a.code, a.header, a.body)
	}
	if !n.filed(site+"/p/nt") || siteHits(t, site, "/p/nt") != 1 {
		t.Fatal("the page a crawler asked for through prerender-node was not filed and rendered once")
	}
}

// deploy/nginx-prerender.conf in front of a crawler listener without serve.tokens: the recipe
// sends localhost as Host and leaves out the visitor's Origin and Sec-Fetch-Site, which are
// about the visit to the site, not about a request of freshq's.
func TestEndToEndNginxRecipeWithoutTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, tokenlessServeYAML(serveAddr), "")
	site := nginxSite(t, serveAddr, "unused")
	waitFor(t, "ready", 30*time.Second, n.ready)

	for _, tc := range []struct {
		path    string
		headers map[string]string
	}{
		{"/c/plain", nil},
		{"/c/browser", crossSiteNavigation},
		{"/c/origin", map[string]string{"Origin": "https://www.google.com", "Sec-Fetch-Site": "cross-site"}},
	} {
		a := visitAs(t, site, tc.path, googlebot, tc.headers)
		if a.code != 200 || a.header.Get("X-Freshq-Cache") != "miss" || !strings.Contains(a.body, "<title>shell</title>") {
			t.Errorf("a crawler through nginx, %s: %d %v %q", tc.path, a.code, a.header, a.body)
			continue
		}
		if !n.filed(site + tc.path) {
			t.Errorf("the page a crawler asked for through nginx (%s) was not filed", tc.path)
		}
	}
}
