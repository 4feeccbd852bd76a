package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/freshq/freshq/console"
	"github.com/freshq/freshq/wire"
)

const consoleToken = "console-admin-token"

// consoleAPI reads the operator API with the admin token, as an operator's program does.
type consoleAPI struct {
	t    *testing.T
	addr string
}

func (a consoleAPI) get(path string, out any) int {
	a.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+a.addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("GET %s: %v: %s", path, err, b)
		}
	}
	return resp.StatusCode
}

// serveCounts are the crawler listener's requests by result, read from /metrics.
func (a consoleAPI) serveCounts() console.ServeCounts {
	req, _ := http.NewRequest(http.MethodGet, "http://"+a.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	return console.ParseServeCounts(resp.Body)
}

// browserWatch collects what a page must not do: a console error, an uncaught exception, a
// logged error (CSP violations are logged so), a request outside the origin.
type browserWatch struct {
	mu     sync.Mutex
	origin string
	bad    []string
	reqs   int
}

func (bw *browserWatch) listen(ev any) {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range e.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			bw.bad = append(bw.bad, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
		}
	case *runtime.EventExceptionThrown:
		bw.bad = append(bw.bad, "exception: "+e.ExceptionDetails.Text)
	case *cdplog.EventEntryAdded:
		// The browser asks for /favicon.ico of its own accord when a document (the chart opened
		// alone) names no icon: the API refuses it without the token, and that is no page's error.
		if (e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning) && e.Entry.URL != bw.origin+"/favicon.ico" {
			bw.bad = append(bw.bad, fmt.Sprintf("log %s %s: %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL))
		}
	case *network.EventRequestWillBeSent:
		bw.reqs++
		u := e.Request.URL
		if !strings.HasPrefix(u, bw.origin+"/") && !strings.HasPrefix(u, "data:") {
			bw.bad = append(bw.bad, "request outside the origin: "+u)
		}
	}
}

func (bw *browserWatch) check(t *testing.T, view string) {
	t.Helper()
	bw.mu.Lock()
	defer bw.mu.Unlock()
	for _, b := range bw.bad {
		t.Errorf("%s: %s", view, b)
	}
	bw.bad = nil
}

// sameMoment compares a figure the console shows with the API's read around it: the API is
// read before and after the page, and the page must equal it when the two reads agree (the
// figure did not move meanwhile); moving figures are read again until they hold still.
func sameMoment(t *testing.T, what string, api, page func() string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		a1 := api()
		p := page()
		a2 := api()
		if a1 == a2 {
			if p != a1 {
				t.Errorf("%s: the console shows %q, the API %q", what, p, a1)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the API's figure never held still (%q, %q)", what, a1, a2)
		}
	}
}

// The console in a real Chromium against the real supervisor with the demo corpus: the login
// form lets the admin token in; each view loads with no console error, no CSP violation and
// no request outside the origin; its figures equal the API's read at the same moment; the
// chart has a point per sampled minute; recache changes the queue and the page's last render
// follows; a POST without the CSRF token is refused; and nothing of it answers without the
// admin credentials, nor to another Host with them.
func TestEndToEndConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	n, serveAddr := startConsoleNode(t, "")
	api := consoleAPI{t: t, addr: n.addr}
	const pageURL = "https://shop01.demo.test/"
	var target wire.Explanation
	waitFor(t, "the demo home page rendered", 60*time.Second, func() bool {
		return api.get("/v1/targets?url="+url.QueryEscape(pageURL), &target) == http.StatusOK && target.LastRender != nil
	})
	if a := crawl(t, serveAddr, "/"+pageURL); a.code != http.StatusOK {
		t.Fatalf("a crawler's request: %d %q", a.code, a.body)
	}

	origin := "http://" + n.addr
	cb := newConsoleBrowser(t, origin)
	ctx, bw, run, text, shot := cb.ctx, cb.bw, cb.run, cb.text, cb.shot
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	// Without credentials: the login form; with the token: the overview.
	run("opening the console", chromedp.Navigate(origin+"/ui/"), chromedp.WaitVisible(css(`input[name=token]`)))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if loc != origin+"/ui/login" {
		t.Fatalf("without a session /ui/ went to %s, want the login form", loc)
	}
	bw.check(t, "login")
	run("a wrong token", chromedp.SendKeys(css(`input[name=token]`), "wrong"), chromedp.Submit(css(`input[name=token]`)), chromedp.WaitVisible(css(`#error`)))
	bw.mu.Lock()
	bw.bad = nil // the browser logs the 401 of the refused login as an error: expected
	bw.mu.Unlock()
	run("logging in", chromedp.SendKeys(css(`input[name=token]`), consoleToken), chromedp.Submit(css(`input[name=token]`)), chromedp.WaitVisible(css(`#backlog-cold`)))
	bw.check(t, "overview")

	// The overview's figures are the API's.
	sameMoment(t, "overview", func() string {
		var q wire.QueueView
		api.get("/v1/queue", &q)
		sc := api.serveCounts()
		return fmt.Sprintf("%d %d %d %d %s %.2f %.0f %.0f %.0f", q.Backlog["urgent"], q.Backlog["submitted"], q.Backlog["discovered"],
			q.Backlog["cold"], q.Capacity.Projection.Verdict, q.Capacity.Demand.Total, sc["hit"], sc["stale"], sc["miss"])
	}, func() string {
		run("reloading the overview", chromedp.Navigate(origin+"/ui/"), chromedp.WaitVisible(css(`#backlog-cold`)))
		return fmt.Sprintf("%s %s %s %s %s %s %s %s %s", text("#backlog-urgent"), text("#backlog-submitted"), text("#backlog-discovered"),
			text("#backlog-cold"), text("#verdict"), text("#demand"), text("#serve-hit"), text("#serve-stale"), text("#serve-miss"))
	})
	if text("#serve-hit") == "0" {
		t.Error("the overview counts no hit after a crawler's hit")
	}

	// The chart: a sample each minute of the clock; the chart draws a point per sample whose
	// lane had grants, as /v1/series has them.
	for range 3 {
		n.advanceClock(time.Minute)
		time.Sleep(1500 * time.Millisecond) // let the sampler, which looks each second, see the minute
	}
	var series struct {
		Samples []console.Sample `json:"samples"`
	}
	waitFor(t, "three samples", 30*time.Second, func() bool { return api.get("/v1/series", &series) == 200 && len(series.Samples) >= 3 })
	want := 0
	for _, s := range series.Samples {
		for _, p := range s.P90 {
			if p != nil {
				want++
			}
		}
	}
	run("the overview with its chart", chromedp.Navigate(origin+"/ui/"), chromedp.WaitVisible(css(`#chart`)))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("chart").complete && document.getElementById("chart").naturalWidth > 0`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the chart did not load: %v", err)
	}
	run("the chart", chromedp.Navigate(origin+"/ui/chart.svg"))
	svg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`new XMLSerializer().serializeToString(document.documentElement)`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(svg, `class="pt"`); got == 0 || got < want {
		t.Errorf("the chart draws %d points; /v1/series has %d lane-minutes with grants", got, want)
	}
	run("back to the overview", chromedp.Navigate(origin+"/ui/"), chromedp.WaitVisible(css(`#chart`)))
	shot("overview")
	bw.check(t, "overview with the chart")

	// Pages: search, the page's figures, the preview, recache.
	run("searching a page", chromedp.Navigate(origin+"/ui/pages"), chromedp.SendKeys(css(`#search-url`), pageURL), chromedp.Submit(css(`#search-url`)), chromedp.WaitVisible(css(`#target`)))
	sameMoment(t, "page", func() string {
		var e wire.Explanation
		api.get("/v1/targets?url="+url.QueryEscape(pageURL), &e)
		return e.Lane + " " + e.LastRender.At.UTC().Format("2006-01-02 15:04:05Z")
	}, func() string {
		run("reloading the page", chromedp.Reload(), chromedp.WaitVisible(css(`#target`)))
		lr := text("#last-render")
		return text("#lane") + " " + lr[strings.Index(lr, " at ")+4:strings.Index(lr, ",")]
	})
	sandbox, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("preview").getAttribute("sandbox")`))
	if err != nil || sandbox != "" {
		t.Errorf("the preview frame's sandbox is %q (%v), want an empty one: no script", sandbox, err)
	}
	previewSrc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("preview").src`))
	if err != nil {
		t.Fatal(err)
	}
	shot("page")
	bw.check(t, "page")
	api.get("/v1/targets?url="+url.QueryEscape(pageURL), &target)
	before := target.LastRender.At
	type history struct {
		Renders []console.RenderEntry `json:"renders"`
	}
	var h0 history
	api.get("/v1/renders?url="+url.QueryEscape(pageURL), &h0)
	if len(h0.Renders) == 0 {
		t.Fatal("/v1/renders has no render of a rendered page")
	}
	run("recache", chromedp.Click(css(`#action-recache`)), chromedp.WaitVisible(css(`#done`)))
	var after wire.Explanation
	api.get("/v1/targets?url="+url.QueryEscape(pageURL), &after)
	if after.Lane != "urgent" && !after.LastRender.At.After(before) {
		t.Errorf("after recache the target is in lane %s, last rendered %s: the queue did not change", after.Lane, after.LastRender.At)
	}
	waitFor(t, "the page view shows the render the recache asked for", 60*time.Second, func() bool {
		run("reloading the page", chromedp.Navigate(origin+"/ui/page?url="+url.QueryEscape(pageURL)), chromedp.WaitVisible(css(`#last-render`)))
		return !strings.Contains(text("#last-render"), before.UTC().Format("2006-01-02 15:04:05Z"))
	})
	// The page's history: the recache's render is in /v1/renders, and the page view lists
	// the renders /v1/renders lists.
	var h1 history
	waitFor(t, "the recache's render in the page's history", 60*time.Second, func() bool {
		return api.get("/v1/renders?url="+url.QueryEscape(pageURL), &h1) == http.StatusOK && len(h1.Renders) > len(h0.Renders)
	})
	if h1.Renders[0].Outcome != "ok" {
		t.Errorf("the recache's render: %+v, want ok", h1.Renders[0])
	}
	sameMoment(t, "page history", func() string {
		var h history
		api.get("/v1/renders?url="+url.QueryEscape(pageURL), &h)
		return fmt.Sprintf("%d %s", len(h.Renders), h.Renders[0].Outcome)
	}, func() string {
		run("reloading the page", chromedp.Navigate(origin+"/ui/page?url="+url.QueryEscape(pageURL)), chromedp.WaitVisible(css(`#renders`)))
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#renders tr").length - 1`))
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d %s", rows, text("#renders tr:nth-child(2) td:nth-child(2)"))
	})
	shot("page-history")
	bw.check(t, "page after recache")

	// Sites, failures, cluster.
	run("sites", chromedp.Navigate(origin+"/ui/sites"), chromedp.WaitVisible(css(`#hosts-tracked`)))
	sameMoment(t, "sites", func() string {
		var q wire.QueueView
		api.get("/v1/queue", &q)
		return fmt.Sprint(q.HostsTracked)
	}, func() string {
		run("reloading sites", chromedp.Reload(), chromedp.WaitVisible(css(`#hosts-tracked`)))
		return text("#hosts-tracked")
	})
	shot("sites")
	bw.check(t, "sites")
	run("failures", chromedp.Navigate(origin+"/ui/failures"), chromedp.WaitVisible(css(`h1`)))
	shot("failures")
	bw.check(t, "failures")
	if code := api.get("/v1/cluster", nil); code != http.StatusNotFound {
		t.Fatalf("/v1/cluster on Badger: %d, want 404", code)
	}
	run("cluster", chromedp.Navigate(origin+"/ui/cluster"), chromedp.WaitVisible(css(`#single-node`)))
	shot("cluster")
	bw.check(t, "cluster")
	if bw.reqs == 0 {
		t.Fatal("the browser watch saw no request: it watches nothing")
	}

	// The session the browser holds, from a program: a POST without the CSRF token is refused
	// and changes nothing.
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{origin + "/ui/"}})
	if err != nil {
		t.Fatal(err)
	}
	var sess *http.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == console.CookieName {
			sess = &http.Cookie{Name: c.Name, Value: c.Value}
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict {
				t.Errorf("session cookie %+v: want HttpOnly and SameSite=Strict", c)
			}
		}
	}
	if sess == nil {
		t.Fatal("the browser holds no session cookie")
	}
	send := func(method, path, host string, form url.Values, cookie *http.Cookie, bearer bool) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, origin+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if host != "" {
			req.Host = host
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		if bearer {
			req.Header.Set("Authorization", "Bearer "+consoleToken)
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}
	// The preview the page's frame loads is the stored page, under its sandbox CSP.
	preq, _ := http.NewRequest(http.MethodGet, previewSrc, nil)
	preq.AddCookie(sess)
	presp, err := http.DefaultClient.Do(preq)
	if err != nil {
		t.Fatal(err)
	}
	pbody, _ := io.ReadAll(presp.Body)
	presp.Body.Close()
	if presp.StatusCode != http.StatusOK || !strings.Contains(string(pbody), "<h1>"+pageURL+"</h1>") || presp.Header.Get("Content-Security-Policy") != console.PreviewCSP {
		t.Errorf("the preview %s: %d %q CSP %q, want the stored page under %q", previewSrc, presp.StatusCode, pbody, presp.Header.Get("Content-Security-Policy"), console.PreviewCSP)
	}
	if code, _ := send(http.MethodPost, "/ui/action", "", url.Values{"op": {"delete"}, "url": {pageURL}}, sess, false); code != http.StatusForbidden {
		t.Errorf("a POST without the CSRF token: %d, want 403", code)
	}
	if code := api.get("/v1/targets?url="+url.QueryEscape(pageURL), nil); code != http.StatusOK {
		t.Errorf("the refused delete deleted: /v1/targets answers %d", code)
	}

	// Without credentials nothing but the login form answers; with them, not to another Host.
	for _, path := range []string{"/ui/", "/ui/pages", "/ui/page?url=" + url.QueryEscape(pageURL), "/ui/preview?url=" + url.QueryEscape(pageURL),
		"/ui/sites", "/ui/failures", "/ui/cluster", "/ui/chart.svg"} {
		if code, to := send(http.MethodGet, path, "", nil, nil, false); code != http.StatusSeeOther || to != "/ui/login" {
			t.Errorf("GET %s without credentials: %d to %q, want 303 to the login form", path, code, to)
		}
		if code, _ := send(http.MethodGet, path, "", nil, &http.Cookie{Name: console.CookieName, Value: "forged.1.x"}, false); code != http.StatusSeeOther {
			t.Errorf("GET %s with a forged cookie: %d, want 303", path, code)
		}
		if code, _ := send(http.MethodGet, path, "", nil, sess, false); code != http.StatusOK {
			t.Errorf("GET %s with the session: %d, want 200", path, code)
		}
		for _, cred := range []struct {
			c *http.Cookie
			b bool
		}{{sess, false}, {nil, true}} {
			if code, _ := send(http.MethodGet, path, "evil.example", nil, cred.c, cred.b); code != http.StatusMisdirectedRequest {
				t.Errorf("GET %s from Host evil.example with credentials: %d, want 421", path, code)
			}
		}
	}
	for _, path := range []string{"/ui/action", "/ui/logout"} {
		if code, _ := send(http.MethodPost, path, "", url.Values{"op": {"delete"}, "url": {pageURL}}, nil, false); code != http.StatusUnauthorized {
			t.Errorf("POST %s without credentials: %d, want 401", path, code)
		}
	}
	if code, _ := send(http.MethodGet, "/v1/series", "", nil, nil, false); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/series without the token: %d, want 401", code)
	}
}
