package serve

import (
	"testing"

	"github.com/freshq/freshq/crawlers"
)

// The crawler listener counts each crawler answer per page (the page's key) and family, as it
// counts them per family: a hit and a refusal of an unverified claim, each under its page; a
// request that claims no crawler, and one that names no valid page, not at all.
func TestCrawlerAnswersCountedPerPage(t *testing.T) {
	n, _ := verifyingNode(t)
	pages := &crawlers.PageTally{}
	n.h.d.Pages = pages
	n.file(t, page)
	n.render(t, "desktop|"+page, "ok", 200, "<html>stored</html>", nil)
	n.get("/"+page, "User-Agent", googlebot, "X-Forwarded-For", impostorIP.String())                        // hit
	n.get("/"+page, "User-Agent", googlebot, "X-Forwarded-For", impostorIP.String())                        // hit
	n.get("/"+page, "User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0")                          // no crawler
	n.get("/https://shop.test/not-stored", "User-Agent", googlebot, "X-Forwarded-For", impostorIP.String()) // refused
	n.get("/not a url", "User-Agent", googlebot, "X-Forwarded-For", impostorIP.String())                    // no page
	got := pages.Page([]byte("desktop|" + page))
	if !got.Tracked || len(got.Families) != 1 || got.Families[0].Family != crawlers.Google || got.Families[0].Hit != 2 || got.Families[0].Requests != 2 {
		t.Errorf("the stored page: %+v, want Googlebot's 2 hits", got)
	}
	got = pages.Page([]byte("desktop|https://shop.test/not-stored"))
	if !got.Tracked || len(got.Families) != 1 || got.Families[0].Refused != 1 || got.Families[0].Requests != 1 {
		t.Errorf("the page not stored: %+v, want Googlebot's 1 refusal", got)
	}
	if s := pages.Stats(); s.Pages != 2 {
		t.Errorf("the table holds %d pages, want the 2 asked for", s.Pages)
	}
}
