package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

// pagesAPI answers the pages views' reads (GET /v1/targets/list, /v1/targets/crawlers) and
// records their queries; anything else is fakeAPI's.
type pagesAPI struct {
	fakeAPI
	mu       sync.Mutex
	lists    []url.Values
	list     wire.PageList
	crawlers string // the JSON of /v1/targets/crawlers; "": 404 naming serve.listen
}

func (p *pagesAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/targets/list":
		p.mu.Lock()
		p.lists = append(p.lists, r.URL.Query())
		p.mu.Unlock()
		json.NewEncoder(w).Encode(p.list)
	case "GET /v1/targets/crawlers":
		if p.crawlers == "" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"not found: worker 0 serves no crawler listener","field":"serve.listen"}`))
		} else {
			w.Write([]byte(p.crawlers))
		}
	default:
		p.serve(w, r)
	}
	return w.Result(), nil
}

func newPagesFixture(t *testing.T, api *pagesAPI) *fixture {
	t.Helper()
	f := &fixture{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), token: "tok"}
	c, err := New(Options{Token: func() string { return f.token }, API: &http.Client{Transport: api},
		Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

// A prefix search lists the API's page of targets under the prefix, each a link to its page
// view; what the list holds is escaped wherever it lands (text, link); the next page is the
// same search after the API's cursor.
func TestPagesPrefixSearchListsTheAPIsPage(t *testing.T) {
	const odd = `https://shop.test/c/"><script>alert(1)</script>&x=1`
	api := &pagesAPI{list: wire.PageList{Prefix: "https://shop.test/c/", Next: "desktop|" + odd, Scanned: 3, Pages: []wire.PageEntry{
		{URL: "https://shop.test/c/1", Device: "desktop", DueAt: time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC), IntervalSec: 3600, Submitted: true},
		{URL: odd, Device: "mobile", Urgent: true},
	}}}
	f := newPagesFixture(t, api)
	sess := sessionCookie(t, f.do(http.MethodPost, "/ui/login", url.Values{"token": {"tok"}}, nil))
	w := f.do(http.MethodGet, "/ui/pages?prefix="+url.QueryEscape("https://shop.test/c/")+"&device=&after="+url.QueryEscape("desktop|https://shop.test/c/0"), nil, sess)
	if w.Code != http.StatusOK {
		t.Fatalf("prefix search: %d %s", w.Code, w.Body)
	}
	if len(api.lists) != 1 {
		t.Fatalf("the API was asked %d lists", len(api.lists))
	}
	if q := api.lists[0]; q.Get("prefix") != "https://shop.test/c/" || q.Get("after") != "desktop|https://shop.test/c/0" || q.Has("device") {
		t.Errorf("the API was asked %v", q)
	}
	body := w.Body.String()
	for _, want := range []string{
		`id="page-list"`,
		`<a href="/ui/page?url=https%3a%2f%2fshop.test%2fc%2f1&amp;device=desktop">https://shop.test/c/1</a>`,
		`&lt;script&gt;alert(1)&lt;/script&gt;&amp;x=1</a>`,
		`href="/ui/page?url=https%3a%2f%2fshop.test%2fc%2f%22%3e%3cscript%3ealert%281%29%3c%2fscript%3e%26x%3d1&amp;device=mobile"`,
		`id="next-page" href="/ui/pages?prefix=https%3a%2f%2fshop.test%2fc%2f&amp;device=&amp;after=desktop%7chttps%3a%2f%2fshop.test%2fc%2f%22%3e%3cscript%3e`,
		`<td>urgent</td>`, `<td>60 min</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>") {
		t.Error("the list carries the URL's <script> unescaped")
	}
	// An API refusal is shown with its status and field.
	api.list = wire.PageList{}
	bad := f.do(http.MethodGet, "/ui/pages?prefix="+strings.Repeat("a", maxParam+1), nil, sess)
	if bad.Code != http.StatusBadRequest || !strings.Contains(bad.Body.String(), "prefix") {
		t.Errorf("a prefix over the bound: %d %s", bad.Code, bad.Body)
	}
}

// The page view shows the crawler requests by family the API answers, with a bar per family;
// without a crawler listener it says so rather than failing.
func TestPageViewShowsCrawlerFamilies(t *testing.T) {
	api := &pagesAPI{crawlers: `{"url":"https://shop.test/p/1","device":"desktop","tracked":true,"since_ms":1772366400000,
	"families":[{"family":"google","requests":4,"hit":3,"stale":1,"last_ms":1772366460000},{"family":"bing","requests":2,"miss":2,"last_ms":1772366430000}],
	"table":{"pages":1,"max_pages":10000}}`}
	f := newPagesFixture(t, api)
	sess := sessionCookie(t, f.do(http.MethodPost, "/ui/login", url.Values{"token": {"tok"}}, nil))
	w := f.do(http.MethodGet, "/ui/page?url="+url.QueryEscape("https://shop.test/p/1"), nil, sess)
	if w.Code != http.StatusOK {
		t.Fatalf("page view: %d %s", w.Code, w.Body)
	}
	body := w.Body.String()
	for _, want := range []string{
		`<tr id="crawler-google"><td>google</td><td class="n">4</td><td><svg width="120" height="10" class="bar"><rect width="120" height="10"/></svg></td><td>3</td><td>1</td><td>0</td><td>0</td><td>2026-03-01 12:01:00Z</td></tr>`,
		`<tr id="crawler-bing"><td>bing</td><td class="n">2</td><td><svg width="120" height="10" class="bar"><rect width="60" height="10"/></svg></td><td>0</td><td>0</td><td>2</td>`,
		`since 2026-03-01 12:00:00Z`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page view lacks %s", want)
		}
	}
	api.crawlers = ""
	w = f.do(http.MethodGet, "/ui/page?url="+url.QueryEscape("https://shop.test/p/1"), nil, sess)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "serves no crawler listener") {
		t.Errorf("without a crawler listener: %d %s", w.Code, w.Body)
	}
}
