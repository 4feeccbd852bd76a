package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

// A render that completes but has lost the page (an error state, a shell whose script threw,
// data still loading, a maintenance page, an old script kept by the browser's cache) must not
// replace a good page: the crawler keeps getting the last good one, the reason is counted, and
// a page that really changed is accepted once renders agree. These tests run the real
// supervisor and workers against a React 18 shop (the UMD builds of the pinned react and
// react-dom in testdata/verdict, installed with npm ci in the test's directory) rendered by
// Chromium, and against plain pages rendered by the http renderer. Time is the injected clock:
// a page is made due by moving every process's clock past its due time, never by sleeping.

// verdictSuspectReasons are the reasons' label values of freshq_render_suspect_total.
var verdictSuspectReasons = []string{"exception", "failed_request", "pending_request", "text_collapsed",
	"lost_title", "lost_h1", "lost_description", "lost_canonical", "expect_missing"}

// verdictYAML is a node rendering with renderer, its crawler listener on serveAddr. Pages are
// due one cadence (the catalog route's 24h) after their render (queue.policy ready), so that
// the tests know when a page is due.
func verdictYAML(serveAddr, renderer string) string {
	return fmt.Sprintf(`queue: {policy: ready, ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: %s
  concurrency: 2
  timeout: 40s
  domains: ["127.0.0.1"]
serve:
  listen: %s
  tokens: [crawl-token]
  wait: 90s
`, renderer, serveAddr)
}

// npmCI installs the pinned packages of testdata/<from> (package.json and its lock) with npm ci
// in a directory of the test's, and returns it.
func npmCI(t testing.TB, from string) string {
	t.Helper()
	npm := needTool(t, "npm")
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", from, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	return dir
}

type shopProduct struct {
	ID          int    `json:"id"`
	Name        string `json:"name"`
	Price       string `json:"price"`
	Description string `json:"description"`
}

// shopOrigin is the React shop's site: the document of every /c/ path (the app routes on the
// client), the React builds, the app and its config script, and the product API, each of which
// a test can break and mend. It counts the requests for each path.
type shopOrigin struct {
	*httptest.Server
	react, reactDOM, app []byte

	mu           sync.Mutex
	hits         map[string]int
	products     []shopProduct
	apiStatus    int           // 0: 200 with the products; else the API answers this status
	apiDelay     time.Duration // how long the API takes to answer
	configBroken bool          // the config script deploys without its endpoints: the app throws before mounting
	readyRoute   bool          // the app deployed is the one with the /c/ready/:id route
	appCache     string        // the app's Cache-Control
}

const shopDoc = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Kettle Shop</title>
<script src="/static/config.js"></script></head>
<body><div id="root"><p>Loading…</p></div>
<script src="/static/react.production.min.js"></script>
<script src="/static/react-dom.production.min.js"></script>
<script src="/static/app.js"></script></body></html>`

func newShopOrigin(t *testing.T) *shopOrigin {
	t.Helper()
	mods := npmCI(t, "verdict")
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	o := &shopOrigin{
		react:    read(filepath.Join(mods, "node_modules", "react", "umd", "react.production.min.js")),
		reactDOM: read(filepath.Join(mods, "node_modules", "react-dom", "umd", "react-dom.production.min.js")),
		app:      read(filepath.Join("testdata", "verdict", "app.js")),
		hits:     map[string]int{},
		appCache: "no-cache",
		products: []shopProduct{
			{1, "Blue Kettle", "€39", "A stovetop kettle in enamelled steel that whistles when the water boils."},
			{2, "Copper Teapot", "€54", "A hammered copper teapot for six cups, with a removable infuser."},
			{3, "Stoneware Mug", "€12", "A glazed stoneware mug that keeps tea warm."},
		},
	}
	if !strings.Contains(string(o.app), "var READY_ROUTE = false;") {
		t.Fatal("testdata/verdict/app.js lost its READY_ROUTE switch")
	}
	o.Server = httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(o.Close)
	return o
}

func (o *shopOrigin) serve(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.hits[r.URL.Path]++
	products := slices.Clone(o.products)
	status, delay, broken, ready, appCache := o.apiStatus, o.apiDelay, o.configBroken, o.readyRoute, o.appCache
	o.mu.Unlock()
	js := func(cache string, body []byte) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", cache)
		w.Write(body)
	}
	switch p := r.URL.Path; {
	case p == "/static/react.production.min.js":
		js("public, max-age=31536000, immutable", o.react)
	case p == "/static/react-dom.production.min.js":
		js("public, max-age=31536000, immutable", o.reactDOM)
	case p == "/static/app.js":
		app := o.app
		if ready {
			app = []byte(strings.Replace(string(app), "var READY_ROUTE = false;", "var READY_ROUTE = true;", 1))
		}
		js(appCache, app)
	case p == "/static/config.js":
		if broken {
			js("no-cache", []byte(`window.SHOP = {};`))
		} else {
			js("no-cache", []byte(`window.SHOP = {endpoints: {products: "/api/products"}};`))
		}
	case strings.HasPrefix(p, "/api/products"):
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if status != 0 {
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error": "the product service answered %d"}`, status)
			return
		}
		if id, ok := strings.CutPrefix(p, "/api/products/"); ok {
			for _, pr := range products {
				if strconv.Itoa(pr.ID) == id {
					json.NewEncoder(w).Encode(pr)
					return
				}
			}
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error": "no such product"}`)
			return
		}
		json.NewEncoder(w).Encode(products)
	case strings.HasPrefix(p, "/c/"):
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		fmt.Fprint(w, shopDoc)
	default:
		http.NotFound(w, r)
	}
}

func (o *shopOrigin) set(f func(o *shopOrigin)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f(o)
}

func (o *shopOrigin) hitsOf(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits[path]
}

// verdictView is the verdict part of GET /v1/targets?url=.
type verdictView struct {
	Result  string   `json:"result"`
	Reasons []string `json:"reasons"`
	AtMs    int64    `json:"at_ms"`
	Agree   struct {
		Count   int   `json:"count"`
		FirstMs int64 `json:"first_ms"`
	} `json:"agree"`
	Marked bool `json:"marked"`
}

// explainVerdict reads GET /v1/targets?url= (desktop): the explanation, its verdict (nil when
// the answer has none) and, for messages, the answer's verdict as it came (the whole answer
// when it has none, or is not a 200).
func (n *node) explainVerdict(t *testing.T, u string) (wire.Explanation, *verdictView, string) {
	t.Helper()
	resp, err := http.Get("http://" + n.addr + "/v1/targets?device=desktop&url=" + url.QueryEscape(u))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var ex wire.Explanation
	var raw struct {
		Verdict json.RawMessage `json:"verdict"`
	}
	var v struct {
		Verdict *verdictView `json:"verdict"`
	}
	if resp.StatusCode != http.StatusOK {
		return ex, nil, fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &ex); err != nil {
		t.Fatalf("explain %s: %v: %s", u, err, b)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("explain %s: the verdict: %v: %s", u, err, b)
	}
	json.Unmarshal(b, &raw)
	if v.Verdict == nil {
		return ex, nil, "no verdict in " + string(b)
	}
	return ex, v.Verdict, `"verdict": ` + string(raw.Verdict)
}

// renderDone reports whether u's row holds no lease of a render in flight: worker 0 has
// committed the result of the render that held it (a released lease is in its grace).
func (n *node) renderDone(t *testing.T, u string) bool {
	ex, _, _ := n.explainVerdict(t, u)
	return ex.Lease == nil || ex.Lease.Released
}

// awaitRender waits until the origin has served path more than before times and u's render
// is over, its result committed.
func (n *node) awaitRender(t *testing.T, what string, hits func() int, before int, u string) {
	t.Helper()
	waitFor(t, what, 120*time.Second, func() bool { return hits() > before && n.renderDone(t, u) })
}

// makeDue moves every process's clock past u's due time (its cadence, or the retry of a failed
// render), once no render of it is in flight (a clock moved during a render would outlive its
// lease, and its result would be fenced).
func (n *node) makeDue(t *testing.T, u string) {
	t.Helper()
	waitFor(t, "no render of "+u+" in flight", 120*time.Second, func() bool { return n.renderDone(t, u) })
	ex, _, raw := n.explainVerdict(t, u)
	if ex.Key == "" {
		t.Fatalf("%s is not filed: %s", u, raw)
	}
	if ex.DueInSec > 0 {
		n.advanceClock(time.Duration(ex.DueInSec*float64(time.Second)) + time.Second)
	}
}

// suspectCounts is freshq_render_suspect_total by reason, and the accepted count.
func suspectCounts(m map[string]float64) (by map[string]float64, accepted float64) {
	by = map[string]float64{}
	for _, r := range verdictSuspectReasons {
		if v := m[`freshq_render_suspect_total{reason="`+r+`"}`]; v != 0 {
			by[r] = v
		}
	}
	return by, m["freshq_render_suspect_accepted_total"]
}

// excerpt is the visible part of a crawler's answer worth printing: the app's root.
func excerpt(body string) string {
	if i := strings.Index(body, `<div id="root">`); i >= 0 {
		body = body[i:]
	}
	if len(body) > 400 {
		body = body[:400] + "…"
	}
	return body
}

// shopNode starts a node rendering with Chromium, its crawler listener on a free port.
func shopNode(t *testing.T) (*node, string) {
	t.Helper()
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, verdictYAML(serveAddr, "chrome"), "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	return n, serveAddr
}

// crawlGood crawls u and requires a 200 whose body has every one of want and none of refuse.
func crawlGood(t *testing.T, serveAddr, u, when string, want, refuse []string) crawlAnswer {
	t.Helper()
	a := crawl(t, serveAddr, "/"+u)
	ok := a.code == http.StatusOK
	for _, w := range want {
		ok = ok && strings.Contains(a.body, w)
	}
	for _, r := range refuse {
		ok = ok && !strings.Contains(a.body, r)
	}
	if !ok {
		t.Errorf("%s: the crawler got %d (X-Freshq-Cache %q) %q; want 200 with %q and without %q",
			when, a.code, a.header.Get("X-Freshq-Cache"), excerpt(a.body), want, refuse)
	}
	return a
}

// shopBreaks is scenarios 1 and 2: pages of the shop rendered good; the shop broken by
// breakShop, the pages made due (their cadence passed) and rendered again: the crawler keeps
// the last good pages, none of broken in them, and reason is counted; the shop mended (and a
// product renamed), the pages made due again: the next render is applied.
func shopBreaks(t *testing.T, pages []string, breakShop func(o *shopOrigin), reason string, broken []string) {
	needChromium(t)
	o := newShopOrigin(t)
	n, serveAddr := shopNode(t)
	good := map[string][]string{
		"/c/shop":     {"Blue Kettle", "Copper Teapot", "Stoneware Mug"},
		"/c/shop/p/1": {"Blue Kettle", "enamelled steel"},
	}
	for _, p := range pages {
		crawlGood(t, serveAddr, o.URL+p, "first render of "+p, good[p], []string{"Something went wrong", "Loading…"})
	}
	if t.Failed() {
		t.FailNow()
	}

	o.set(breakShop)
	before := map[string]int{}
	for _, p := range pages {
		before[p] = o.hitsOf(p)
		n.makeDue(t, o.URL+p)
	}
	for _, p := range pages {
		n.awaitRender(t, "the render of "+p+" while the shop is broken", func() int { return o.hitsOf(p) }, before[p], o.URL+p)
	}
	for _, p := range pages {
		crawlGood(t, serveAddr, o.URL+p, "after a render of "+p+" while the shop is broken", good[p], broken)
	}
	by, _ := suspectCounts(n.metrics())
	if by[reason] == 0 {
		t.Errorf(`freshq_render_suspect_total{reason=%q} = 0 after the broken renders; suspect counts %v`, reason, by)
	}
	for _, p := range pages {
		if _, v, raw := n.explainVerdict(t, o.URL+p); v == nil || v.Result != "suspect" || !slices.Contains(v.Reasons, reason) {
			t.Errorf("%s: /v1/targets gives no suspect verdict naming %s: %.1500s", p, reason, raw)
		}
	}

	// The shop is mended and a product renamed: the next render is applied.
	o.set(func(o *shopOrigin) {
		o.apiStatus, o.configBroken = 0, false
		o.products[0].Name = "Blue Kettle Mk II"
	})
	for _, p := range pages {
		before[p] = o.hitsOf(p)
		n.makeDue(t, o.URL+p)
	}
	for _, p := range pages {
		n.awaitRender(t, "the render of "+p+" once the shop is mended", func() int { return o.hitsOf(p) }, before[p], o.URL+p)
	}
	for _, p := range pages {
		crawlGood(t, serveAddr, o.URL+p, "after the shop is mended", append([]string{"Blue Kettle Mk II"}, good[p][1:]...), []string{"Something went wrong"})
		if _, v, raw := n.explainVerdict(t, o.URL+p); v == nil || v.Result != "good" {
			t.Errorf("%s: /v1/targets gives no good verdict after the mended render: %.1500s", p, raw)
		}
	}
}

// 1. The product API answers 500: the app shows "Something went wrong" with a 200. The crawler
// keeps the last good list and product page; reason failed_request; once the API is back, the
// render is applied.
func TestEndToEndVerdictFailedAPIKeepsGoodPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	shopBreaks(t, []string{"/c/shop", "/c/shop/p/1"}, func(o *shopOrigin) { o.apiStatus = http.StatusInternalServerError },
		"failed_request", []string{"Something went wrong"})
}

// 2. A config script deployed broken makes the app throw before it mounts: the page is the
// shell's "Loading…". The crawler keeps the last good list; reason exception.
func TestEndToEndVerdictThrowingScriptKeepsGoodPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	shopBreaks(t, []string{"/c/shop"}, func(o *shopOrigin) { o.configBroken = true }, "exception", []string{"Loading…"})
}

// 3. The product API takes 3 s and the page sets no prerenderReady: the page stored has the
// products (render.chrome.data_wait, 10 s by default, holds readiness for the page's own data
// requests), never the "Loading…" captured when the request stopped holding idleness.
func TestEndToEndVerdictSlowAPIWaitsForData(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	o := newShopOrigin(t)
	o.set(func(o *shopOrigin) { o.apiDelay = 3 * time.Second })
	n, serveAddr := shopNode(t)
	u := o.URL + "/c/shop"
	crawlGood(t, serveAddr, u, "the first render with a 3 s API", []string{"Blue Kettle", "Copper Teapot", "Stoneware Mug"}, []string{"Loading…"})
	a := n.do("GET", "/v1/pages?url="+url.QueryEscape(u), "", nil)
	if a.code != http.StatusOK || !strings.Contains(string(a.body), "Blue Kettle") {
		t.Errorf("the stored page: %d %q", a.code, excerpt(string(a.body)))
	}
}

// 4. The site deploys a new app.js under the same URL, cached for a day (max-age=1d), with a new
// client route /c/ready/42. The long-lived browser holds the old app from the first render; a
// crawler's request for the new route gets its content at the latest on its second attempt,
// and the old app's NotFound (a declared 404) is never stored.
func TestEndToEndVerdictNewDeployUnderCachedScript(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	o := newShopOrigin(t)
	o.set(func(o *shopOrigin) { o.appCache = "public, max-age=86400" })
	n, serveAddr := shopNode(t)
	crawlGood(t, serveAddr, o.URL+"/c/shop", "the first render, the old app", []string{"Blue Kettle"}, nil)
	if h := o.hitsOf("/static/app.js"); h != 1 {
		t.Fatalf("the old app was fetched %d times by the first render, want 1", h)
	}

	o.set(func(o *shopOrigin) { o.readyRoute = true })
	u := o.URL + "/c/ready/42"
	const notFound = "No page of the shop has this address." // the old app's NotFound page
	storedNotFound := func(when string) {
		t.Helper()
		a := n.do("GET", "/v1/pages?url="+url.QueryEscape(u), "", nil)
		if strings.Contains(string(a.body), notFound) {
			t.Errorf("%s: the old app's NotFound is stored for %s: %d %q", when, u, a.code, excerpt(string(a.body)))
		}
		if ex, _, _ := n.explainVerdict(t, u); ex.LastRender != nil && ex.LastRender.Status == http.StatusNotFound {
			t.Errorf("%s: the last render of %s is a 404: %+v", when, u, ex.LastRender)
		}
	}
	first := crawl(t, serveAddr, "/"+u)
	got := first.code == http.StatusOK && strings.Contains(first.body, "Order 42 is ready")
	t.Logf("first attempt: %d (X-Freshq-Cache %q) %q; app.js fetched %d times", first.code, first.header.Get("X-Freshq-Cache"), excerpt(first.body), o.hitsOf("/static/app.js"))
	if !got && strings.Contains(first.body, notFound) {
		t.Errorf("first attempt: the crawler got the old app's NotFound: %d %q", first.code, excerpt(first.body))
	}
	storedNotFound("after the first attempt")
	if !got {
		waitFor(t, "no render of "+u+" in flight", 120*time.Second, func() bool { return n.renderDone(t, u) })
		crawlGood(t, serveAddr, u, "second attempt", []string{"Order 42 is ready"}, []string{notFound})
		storedNotFound("after the second attempt")
	}
}

// 7. A page whose first render is already broken (the API answers 500 from the start) has no
// good render to keep: it is stored and served all the same, and /v1/targets says it is marked.
func TestEndToEndVerdictNoGoodRenderIsStoredAndMarked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	o := newShopOrigin(t)
	o.set(func(o *shopOrigin) { o.apiStatus = http.StatusInternalServerError })
	n, serveAddr := shopNode(t)
	u := o.URL + "/c/shop"
	crawlGood(t, serveAddr, u, "the first, broken render", []string{"Something went wrong"}, nil)
	ex, v, raw := n.explainVerdict(t, u)
	if ex.LastRender == nil || ex.LastRender.Status != http.StatusOK {
		t.Errorf("last render %+v, want a 200 stored", ex.LastRender)
	}
	if v == nil || !v.Marked || v.Result != "suspect" || !slices.Contains(v.Reasons, "failed_request") {
		t.Errorf("/v1/targets does not say the page is marked, suspect for failed_request: %.1500s", raw)
	}
	if by, _ := suspectCounts(n.metrics()); by["failed_request"] == 0 {
		t.Errorf(`freshq_render_suspect_total{reason="failed_request"} = 0; suspect counts %v`, by)
	}
}

// pageOrigin is a plain site rendered by the http renderer: each path's page is the one set for
// it, or the maintenance page for every path while maintenance is on. It counts the requests
// for each path.
type pageOrigin struct {
	*httptest.Server
	mu          sync.Mutex
	hits        map[string]int
	pages       map[string]string
	maintenance bool
}

func newPageOrigin(t *testing.T) *pageOrigin {
	o := &pageOrigin{hits: map[string]int{}, pages: map[string]string{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.hits[r.URL.Path]++
		page, ok := o.pages[r.URL.Path]
		maintenance := o.maintenance
		o.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch {
		case maintenance:
			fmt.Fprint(w, `<!doctype html><html><body><p>We are down for maintenance. Back soon.</p></body></html>`)
		case ok:
			fmt.Fprint(w, page)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *pageOrigin) set(path, page string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pages[path] = page
}

func (o *pageOrigin) hitsOf(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits[path]
}

// articlePage is a full page: title, description, canonical link, h1 and a few paragraphs.
func articlePage(base, path, title string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>%s</title>
<meta name="description" content="%s: how to choose, fit and care for them.">
<link rel="canonical" href="%s%s"></head><body><h1>%s</h1>`, title, title, base, path, title)
	for i := range 12 {
		fmt.Fprintf(&b, "<p>Paragraph %d of %s. A good pair keeps the feet warm and dry on the coldest mornings, grips on ice, and lasts several winters when its leather is waxed at the start of each season.</p>\n", i+1, title)
	}
	b.WriteString("</body></html>")
	return b.String()
}

// shrunkPage is the same page after the site removed its content for good: title, description,
// canonical link and h1 kept, one line of text.
func shrunkPage(base, path, title string) string {
	return fmt.Sprintf(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>%s</title>
<meta name="description" content="%s: how to choose, fit and care for them.">
<link rel="canonical" href="%s%s"></head><body><h1>%s</h1><p>This guide is no longer available.</p></body></html>`, title, title, base, path, title)
}

func httpNode(t *testing.T) (*node, string) {
	t.Helper()
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, verdictYAML(serveAddr, "http"), "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	return n, serveAddr
}

// 5. The http renderer: after a good render, the origin answers a 200 maintenance page for
// every path (no title, h1, description or canonical link of the page, one line of text). The
// crawler keeps the good page; the reasons are counted.
func TestEndToEndVerdictMaintenancePageKeepsGoodPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	o := newPageOrigin(t)
	n, serveAddr := httpNode(t)
	const path = "/c/guides/winter-boots"
	u := o.URL + path
	o.set(path, articlePage(o.URL, path, "Winter boots"))
	crawlGood(t, serveAddr, u, "the first render", []string{"<h1>Winter boots</h1>", "Paragraph 12"}, nil)

	o.mu.Lock()
	o.maintenance = true
	o.mu.Unlock()
	before := o.hitsOf(path)
	n.makeDue(t, u)
	n.awaitRender(t, "the render during maintenance", func() int { return o.hitsOf(path) }, before, u)
	crawlGood(t, serveAddr, u, "after the render during maintenance", []string{"<h1>Winter boots</h1>", "Paragraph 12"}, []string{"down for maintenance"})
	by, _ := suspectCounts(n.metrics())
	if by["text_collapsed"]+by["lost_title"]+by["lost_h1"]+by["lost_description"]+by["lost_canonical"] == 0 {
		t.Errorf("no text_collapsed or lost_* in freshq_render_suspect_total after the maintenance render; suspect counts %v", by)
	}
	if _, v, raw := n.explainVerdict(t, u); v == nil || v.Result != "suspect" {
		t.Errorf("/v1/targets gives no suspect verdict for the maintenance render: %.1500s", raw)
	}
}

// 6. A page whose content really shrinks for good is accepted once verdict.agree (3) renders
// with the same content span verdict.agree_span (30m), and not before: page A has three
// agreeing renders within seconds (not over the span) and is kept, then a fourth past the span
// is accepted; page B has two agreeing renders past the span (too few) and is kept, then a
// third is accepted. Renders are counted at the origin.
func TestEndToEndVerdictRealShrinkAcceptedAfterAgreement(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	o := newPageOrigin(t)
	n, serveAddr := httpNode(t)
	const pathA, pathB = "/c/guides/winter-boots", "/c/guides/rain-boots"
	o.set(pathA, articlePage(o.URL, pathA, "Winter boots"))
	o.set(pathB, articlePage(o.URL, pathB, "Rain boots"))
	for _, p := range []string{pathA, pathB} {
		crawlGood(t, serveAddr, o.URL+p, "the first render of "+p, []string{"Paragraph 12"}, nil)
	}
	if t.Failed() {
		t.FailNow()
	}

	rush := func(u string) {
		t.Helper()
		var out map[string]any
		if code := n.post("/v1/prioritize", map[string]string{"url": u, "device": "desktop", "mode": "rush"}, &out); code != http.StatusOK {
			t.Fatalf("rush %s: %d %v", u, code, out)
		}
	}
	// renderNow renders u once more: rushed, unless it is due already (a retry of a suspect
	// render whose delay the clock passed), so that exactly one render happens.
	renderNow := func(path string) {
		t.Helper()
		u := o.URL + path
		waitFor(t, "no render of "+u+" in flight", 120*time.Second, func() bool { return n.renderDone(t, u) })
		before := o.hitsOf(path)
		if ex, _, _ := n.explainVerdict(t, u); ex.DueInSec > 0 {
			rush(u)
		}
		n.awaitRender(t, "a render of "+path, func() int { return o.hitsOf(path) }, before, u)
	}
	kept := func(path, when string) {
		t.Helper()
		crawlGood(t, serveAddr, o.URL+path, when, []string{"Paragraph 12"}, []string{"no longer available"})
	}
	accepted := func(path, when string) {
		t.Helper()
		crawlGood(t, serveAddr, o.URL+path, when, []string{"This guide is no longer available."}, []string{"Paragraph 12"})
	}
	logVerdict := func(path string) {
		_, v, _ := n.explainVerdict(t, o.URL+path)
		by, acc := suspectCounts(n.metrics())
		t.Logf("%s: verdict %+v; suspect counts %v, accepted %v", path, v, by, acc)
	}

	// Page A: three agreeing renders within seconds of each other.
	o.set(pathA, shrunkPage(o.URL, pathA, "Winter boots"))
	for i := 1; i <= 3; i++ {
		renderNow(pathA)
		logVerdict(pathA)
		kept(pathA, fmt.Sprintf("page A after agreeing render %d, all within seconds", i))
	}
	if _, v, raw := n.explainVerdict(t, o.URL+pathA); v == nil || v.Result != "suspect" || v.Agree.Count != 3 {
		t.Errorf("page A after three agreeing renders: want a suspect verdict with agree.count 3: %.1500s", raw)
	}
	if _, acc := suspectCounts(n.metrics()); acc != 0 {
		t.Errorf("freshq_render_suspect_accepted_total = %v before any run spanned verdict.agree_span", acc)
	}
	n.advanceClock(31 * time.Minute)
	renderNow(pathA)
	logVerdict(pathA)
	accepted(pathA, "page A after a fourth agreeing render past verdict.agree_span")
	if _, acc := suspectCounts(n.metrics()); acc != 1 {
		t.Errorf("freshq_render_suspect_accepted_total = %v after page A's run was accepted, want 1", acc)
	}

	// Page B: two agreeing renders over more than the span, then a third.
	o.set(pathB, shrunkPage(o.URL, pathB, "Rain boots"))
	renderNow(pathB)
	logVerdict(pathB)
	kept(pathB, "page B after its first render of the shrunk content")
	n.advanceClock(31 * time.Minute)
	renderNow(pathB)
	logVerdict(pathB)
	kept(pathB, "page B after two agreeing renders 31m apart")
	renderNow(pathB)
	logVerdict(pathB)
	accepted(pathB, "page B after a third agreeing render")
	if _, acc := suspectCounts(n.metrics()); acc != 2 {
		t.Errorf("freshq_render_suspect_accepted_total = %v after page B's run was accepted, want 2", acc)
	}
}
