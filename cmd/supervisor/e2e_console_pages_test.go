package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/wire"
)

const bingbotUA = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)"

// The console's pages view in a real Chromium against the real supervisor with the demo
// corpus: a search by URL prefix lists the pages GET /v1/targets/list lists, a page at a time,
// each a link to its page view; and after crawler requests through the crawler listener with
// Googlebot's and Bingbot's User-Agents, the page view shows the requests by family that GET
// /v1/targets/crawlers answers, and they are the requests sent. No view logs an error or asks
// for anything outside the origin.
func TestEndToEndConsolePages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	consolePages(t, "")
}

// The same on PostgreSQL, whose bounded key iteration (ListSchedule: a range scan of the primary
// key from the page's cursor) the prefix search reads as it reads Badger's seek.
func TestEndToEndConsolePagesOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	consolePages(t, postgresFor(t).yaml)
}

func consolePages(t *testing.T, storeYAML string) {
	needChromium(t)
	n, serveAddr := startConsoleNode(t, storeYAML)
	a := consoleAPI{t: t, addr: n.addr}
	const site = "https://shop01.demo.test/"
	const pageURL = "https://shop01.demo.test/c/category-001"
	var target wire.Explanation
	waitFor(t, "the demo category page rendered", 60*time.Second, func() bool {
		return a.get("/v1/targets?url="+url.QueryEscape(pageURL), &target) == http.StatusOK && target.LastRender != nil
	})
	// Crawlers ask for the page: three Googlebot requests, two Bingbot ones, each a hit.
	for i, ua := range []string{crawlerUA, crawlerUA, bingbotUA, crawlerUA, bingbotUA} {
		if ans := crawl(t, serveAddr, "/"+pageURL, "User-Agent", ua); ans.code != http.StatusOK {
			t.Fatalf("crawler request %d: %d %q", i, ans.code, ans.body)
		}
	}
	var counts api.PageCrawlers
	if code := a.get("/v1/targets/crawlers?url="+url.QueryEscape(pageURL), &counts); code != http.StatusOK {
		t.Fatalf("GET /v1/targets/crawlers: %d", code)
	}
	byFamily := map[string]uint64{}
	for _, f := range counts.Families {
		byFamily[f.Family] = f.Requests
	}
	if !counts.Tracked || byFamily["google"] != 3 || byFamily["bing"] != 2 || len(byFamily) != 2 {
		t.Fatalf("the API counts %+v for 3 Googlebot and 2 Bingbot requests", counts)
	}

	origin := "http://" + n.addr
	cb := newConsoleBrowser(t, origin)
	bw, run, eval, shot := cb.bw, cb.run, cb.eval, cb.shot
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	run("logging in", chromedp.Navigate(origin+"/ui/login"), chromedp.WaitVisible(css(`input[name=token]`)),
		chromedp.SendKeys(css(`input[name=token]`), consoleToken), chromedp.Submit(css(`input[name=token]`)), chromedp.WaitVisible(css(`#backlog-cold`)))
	bw.check(t, "overview")

	// The list in the browser: each row's link, URL and device, as the page shows them.
	listed := func() []string {
		t.Helper()
		rows := eval(`Array.from(document.querySelectorAll("#page-list tr a")).map(a => {
			const u = new URL(a.href); return u.pathname + " " + u.searchParams.get("url") + " " + u.searchParams.get("device") + " " + a.textContent }).join("\n")`)
		if rows == "" {
			return nil
		}
		return strings.Split(rows, "\n")
	}
	fromAPI := func(l wire.PageList) []string {
		var out []string
		for _, p := range l.Pages {
			out = append(out, "/ui/page "+p.URL+" "+p.Device+" "+p.URL)
		}
		return out
	}

	// A prefix search: the demo site's 150 pages, 50 a page, each page the API's after the
	// previous page's cursor, the last one linking no next.
	run("searching a prefix", chromedp.Navigate(origin+"/ui/pages"), chromedp.SendKeys(css(`#search-prefix`), site),
		chromedp.Submit(css(`#search-prefix`)), chromedp.WaitVisible(css(`#page-list`)))
	after, total := "", 0
	for page := 1; ; page++ {
		var l wire.PageList
		if code := a.get("/v1/targets/list?prefix="+url.QueryEscape(site)+"&after="+url.QueryEscape(after), &l); code != http.StatusOK || len(l.Pages) == 0 {
			t.Fatalf("GET /v1/targets/list?prefix=%s after %q: %d, %d pages", site, after, code, len(l.Pages))
		}
		if got, want := listed(), fromAPI(l); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("page %d under %s: the console lists %d pages, the API %d:\n got %q\nwant %q", page, site, len(got), len(want), got, want)
		}
		total += len(l.Pages)
		if page == 1 {
			shot("pages-prefix")
		}
		bw.check(t, fmt.Sprintf("prefix search, page %d", page))
		hasNext := eval(`document.getElementById("next-page") ? "next" : ""`) == "next"
		if hasNext != (l.Next != "") {
			t.Fatalf("page %d: the console links a next page %v, the API's cursor is %q", page, hasNext, l.Next)
		}
		if l.Next == "" {
			break
		}
		if page > 10 {
			t.Fatal("the list never ends")
		}
		after = l.Next
		run("the next page", chromedp.Click(css(`#next-page`)), chromedp.WaitVisible(css(`#page-list`)))
	}
	if total != 150 {
		t.Errorf("the prefix search listed %d pages of the demo site's 150", total)
	}

	// From the list to the page: its crawler requests by family, equal to the API's.
	run("the first page again", chromedp.Navigate(origin+"/ui/pages?prefix="+url.QueryEscape(site)), chromedp.WaitVisible(css(`#page-list`)))
	run("opening the page from the list", chromedp.Click(css(`#page-list a[href*="category-001"]`)), chromedp.WaitVisible(css(`#crawlers`)))
	sameMoment(t, "crawler requests by family", func() string {
		var pc api.PageCrawlers
		a.get("/v1/targets/crawlers?url="+url.QueryEscape(pageURL), &pc)
		var b strings.Builder
		for _, f := range pc.Families {
			fmt.Fprintf(&b, "%s %d %d %d %d %d;", f.Family, f.Requests, f.Hit, f.Stale, f.Miss, f.Refused)
		}
		return b.String()
	}, func() string {
		run("reloading the page", chromedp.Reload(), chromedp.WaitVisible(css(`#crawlers`)))
		return eval(`Array.from(document.querySelectorAll("#crawlers tr[id^=crawler-]")).map(tr => {
			const td = tr.querySelectorAll("td"); return [td[0], td[1], td[3], td[4], td[5], td[6]].map(c => c.textContent.trim()).join(" ") + ";" }).join("")`)
	})
	if got := eval(`document.querySelector("#crawler-google td:nth-child(2)").textContent`); got != "3" {
		t.Errorf("the page view shows %s Googlebot requests, 3 were sent", got)
	}
	if got := eval(`document.querySelector("#crawler-bing td:nth-child(2)").textContent`); got != "2" {
		t.Errorf("the page view shows %s Bingbot requests, 2 were sent", got)
	}
	shot("page-crawlers")
	bw.check(t, "page with its crawlers")
}
