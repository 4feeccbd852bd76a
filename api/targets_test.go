package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/freshq/freshq/internal/qtest"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

func targetsServer(t *testing.T) (*qtest.Env, *httptest.Server) {
	e := qtest.New(t, "render: {user_agents: {tablet: \"freshq-tablet/1\"}}\n", start, shm.Options{})
	mux := http.NewServeMux()
	(&Targets{Store: e.Store, Writer: e.Store, Policy: e.Policy, Now: e.Now}).Register(mux)
	(&Queue{Seg: e.Seg, Now: e.Now}).Register(mux)
	(&Explain{Store: e.Store, Seg: e.Seg, Policy: e.Policy, Now: e.Now}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return e, srv
}

func postTargets(t *testing.T, srv *httptest.Server, body string) (int, TargetsResponse) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v1/targets", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out TargetsResponse
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestPostTargetsArrayAndNDJSON(t *testing.T) {
	e, srv := targetsServer(t)
	code, out := postTargets(t, srv, `[
		{"url": "https://Shop.test/c/shoes#top", "interval": "6h", "source": "sitemap"},
		{"url": "https://shop.test/p/1", "device": "mobile", "interval": 3600},
		{"url": "https://shop.test/blog", "device": "tablet", "source": "discovered", "due": "2027-01-02T03:04:05Z"}
	]`)
	if code != 200 || out.Accepted != 3 || out.Rejected != 0 {
		t.Fatalf("array: %d %+v", code, out)
	}
	row, err := e.Store.GetSchedule([]byte("desktop|https://shop.test/c/shoes"))
	if err != nil || row.DueAtMs != start || !row.FromSitemap || row.EffectiveIntervalMs != 6*hour || !row.NeverRendered {
		t.Fatalf("normalized sitemap row %+v %v", row, err)
	}
	if tg, _ := e.Store.GetTarget([]byte("desktop|https://shop.test/c/shoes")); tg.Source != store.SourceSitemap || tg.StoredIntervalMs != 6*hour {
		t.Fatalf("target %+v", tg)
	}
	if row, _ := e.Store.GetSchedule([]byte("mobile|https://shop.test/p/1")); row.EffectiveIntervalMs != hour || !row.FromSitemap {
		t.Fatalf("api row (submitted) %+v", row)
	}
	if row, _ := e.Store.GetSchedule([]byte("tablet|https://shop.test/blog")); row.FromSitemap || row.DueAtMs != 1798859045000 {
		t.Fatalf("discovered row %+v", row)
	}
	code, out = postTargets(t, srv, "{\"url\": \"https://shop.test/n/1\"}\n\n{\"url\": \"https://shop.test/n/2\"}\n")
	if code != 200 || out.Accepted != 2 {
		t.Fatalf("ndjson: %d %+v", code, out)
	}
}

func TestPostTargetsRejectsEachBadItemByField(t *testing.T) {
	e, srv := targetsServer(t)
	long := "https://shop.test/" + strings.Repeat("x", store.MaxKeyLen)
	code, out := postTargets(t, srv, `[
		{"url": "ftp://shop.test/a"},
		{"url": "/relative"},
		{"url": "`+long+`"},
		{"url": "https://shop.test/ok-1"},
		{"url": "https://shop.test/b", "interval": "-3h"},
		{"url": "https://shop.test/c", "interval": "soon"},
		{"url": "https://shop.test/d", "device": "fridge"},
		{"url": "https://shop.test/e", "source": "rumour"},
		{"url": "https://shop.test/f", "due": "tomorrow"},
		{"url": "https://shop.test/g", "colour": "red"},
		{"url": "https://shop.test/ok-2"}
	]`)
	if code != 200 || out.Accepted != 2 || out.Rejected != 9 {
		t.Fatalf("%d %+v", code, out)
	}
	want := map[int]string{0: "url", 1: "url", 2: "url", 4: "interval", 5: "interval", 6: "device", 7: "source", 8: "due", 9: ""}
	for _, ie := range out.Errors {
		if f, ok := want[ie.Index]; !ok || f != ie.Field || ie.Error == "" {
			t.Errorf("item %d: field %q (%s), want %q", ie.Index, ie.Field, ie.Error, want[ie.Index])
		}
		delete(want, ie.Index)
	}
	if len(want) != 0 {
		t.Errorf("items not reported: %v", want)
	}
	// The good items landed, the bad ones left nothing behind.
	for _, k := range []string{"desktop|https://shop.test/ok-1", "desktop|https://shop.test/ok-2"} {
		if _, err := e.Store.GetSchedule([]byte(k)); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	for _, k := range []string{"desktop|https://shop.test/b", "desktop|https://shop.test/d"} {
		if _, err := e.Store.GetSchedule([]byte(k)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s half-written: %v", k, err)
		}
	}
	if rep, err := e.Store.VerifyIndex(); err != nil {
		t.Fatalf("index: %v %+v", err, rep)
	}
	// All bad: 400. Not JSON at all: 400. Empty: 400.
	if code, _ := postTargets(t, srv, `[{"url": "nope"}]`); code != 400 {
		t.Errorf("all rejected: %d", code)
	}
	for _, body := range []string{`[{"url": `, ``, `[1, 2`} {
		if code, _ := postTargets(t, srv, body); code != 400 {
			t.Errorf("%q: %d, want 400", body, code)
		}
	}
}

func TestPostTargetsUpsertKeepsWhatItOmits(t *testing.T) {
	e, srv := targetsServer(t)
	postTargets(t, srv, `[{"url": "https://shop.test/a", "interval": "12h", "source": "sitemap", "due": "2027-01-01T00:00:00Z"}]`)
	e.Advance(hour)
	if code, out := postTargets(t, srv, `[{"url": "https://shop.test/a", "source": "sitemap"}]`); code != 200 || out.Accepted != 1 {
		t.Fatalf("%d %+v", code, out)
	}
	row, _ := e.Store.GetSchedule([]byte("desktop|https://shop.test/a"))
	if row.DueAtMs != 1798761600000 || row.EffectiveIntervalMs != 12*hour {
		t.Fatalf("re-import reset the row: %+v", row)
	}
}

func TestQueueView(t *testing.T) {
	e, srv := targetsServer(t)
	e.Seg.Floor().Lower(-5)
	resp, err := http.Get(srv.URL + "/v1/queue")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v QueueView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.Floor.Ms != -5 || !v.Ready.Enabled || len(v.Backlog) != 4 || v.Leases.Capacity == 0 {
		t.Fatalf("%+v %v", v, err)
	}
}
