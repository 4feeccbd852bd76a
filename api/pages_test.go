package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/freshq/freshq/crawlers"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/testkit/intaketest"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

func pagesServer(t *testing.T, tally *crawlers.PageTally) *httptest.Server {
	t.Helper()
	e := qtest.New(t, "", start, shm.Options{})
	svc := intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	mux := http.NewServeMux()
	(&Targets{Targets: svc}).Register(mux)
	(&Pages{Targets: svc, Crawlers: tally}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func getPagesJSON(t *testing.T, u string, out any) (int, wire.ErrorBody) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb wire.ErrorBody
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	} else {
		json.NewDecoder(resp.Body).Decode(&eb)
	}
	return resp.StatusCode, eb
}

// GET /v1/targets/crawlers answers the tally's counts of the page the url and device key (the
// url normalised as the crawler listener keys it); without a crawler listener it is 404 naming
// serve.listen; a bad url is 400 naming url.
func TestPageCrawlersAnswersTheTally(t *testing.T) {
	tally := &crawlers.PageTally{}
	tally.Note([]byte("mobile|https://a.test/p"), crawlers.Google, crawlers.GotHit, 5000)
	tally.Note([]byte("mobile|https://a.test/p"), crawlers.Google, crawlers.GotStale, 6000)
	srv := pagesServer(t, tally)
	var got PageCrawlers
	if code, eb := getPagesJSON(t, srv.URL+"/v1/targets/crawlers?"+url.Values{"url": {"HTTPS://A.test:443/p"}, "device": {"mobile"}}.Encode(), &got); code != 200 {
		t.Fatalf("%d %+v", code, eb)
	}
	if !got.Tracked || got.Key != "mobile|https://a.test/p" || len(got.Families) != 1 ||
		got.Families[0].Requests != 2 || got.Families[0].Stale != 1 || got.Families[0].LastMs != 6000 || got.Table.Pages != 1 {
		t.Errorf("answer %+v", got)
	}
	if code, eb := getPagesJSON(t, srv.URL+"/v1/targets/crawlers?url=https://a.test/p", &got); code != 200 || got.Tracked {
		t.Errorf("the desktop page, never asked for: %d %+v %+v", code, eb, got)
	}
	if code, eb := getPagesJSON(t, srv.URL+"/v1/targets/crawlers?url=::", &got); code != 400 || eb.Field != "url" {
		t.Errorf("a bad url: %d %+v", code, eb)
	}
	none := pagesServer(t, nil)
	if code, eb := getPagesJSON(t, none.URL+"/v1/targets/crawlers?url=https://a.test/p", &got); code != 404 || eb.Field != "serve.listen" {
		t.Errorf("no crawler listener: %d %+v", code, eb)
	}
}

// GET /v1/targets/list lists the stored targets under a prefix a page at a time; a bad
// parameter is 400 naming it.
func TestPageListEndpoint(t *testing.T) {
	srv := pagesServer(t, nil)
	if code, out := postTargets(t, srv, `{"url":"https://a.test/c/1"}`+"\n"+`{"url":"https://a.test/c/2"}`+"\n"+`{"url":"https://a.test/d/1"}`+"\n"); code != 200 || out.Accepted != 3 {
		t.Fatalf("loading targets: %d %+v", code, out)
	}
	var l wire.PageList
	if code, eb := getPagesJSON(t, srv.URL+"/v1/targets/list?prefix=https://a.test/c/&limit=1", &l); code != 200 || len(l.Pages) != 1 || l.Pages[0].URL != "https://a.test/c/1" || l.Next != "desktop|https://a.test/c/1" {
		t.Fatalf("first page: %d %+v %+v", code, eb, l)
	}
	if code, eb := getPagesJSON(t, srv.URL+"/v1/targets/list?prefix=https://a.test/c/&limit=1&after="+url.QueryEscape(l.Next), &l); code != 200 || len(l.Pages) != 1 || l.Pages[0].URL != "https://a.test/c/2" {
		t.Fatalf("second page: %d %+v %+v", code, eb, l)
	}
	for q, field := range map[string]string{"": "prefix", "prefix=https://a.test/&limit=x": "limit", "prefix=https://a.test/&limit=0": "limit",
		"prefix=https://a.test/&device=tv": "device", "prefix=https://a.test/&after=nope": "after"} {
		if code, eb := getPagesJSON(t, srv.URL+"/v1/targets/list?"+q, &l); code != 400 || eb.Field != field {
			t.Errorf("?%s: %d %+v, want 400 naming %s", q, code, eb, field)
		}
	}
}
