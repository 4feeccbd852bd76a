package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/intaketest"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// The operator's view of a suspect render: GET /v1/targets says the last verdict (suspect, its
// reasons, the agreement), GET /v1/suspects lists it by site, GET /v1/suspects/page shows its
// body under the API's page CSP, and POST /v1/suspects/accept applies it, refusing bad input
// with a 4xx naming the field and changing nothing.
func TestSuspectsInspectAndAccept(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	set := qtest.Settings(e, IntakeSettingsOf)
	locks := &intake.KeyLocks{}
	a := intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Locks: locks, Seg: e.Seg, Settings: set, Now: e.Now, Suspects: apply.NewSuspects()})
	mux := http.NewServeMux()
	(&Suspects{Applier: a}).Register(mux)
	(&Explain{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: locks, Seg: e.Seg, Settings: set, Now: e.Now})}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	key := []byte("desktop|https://shop.test/p/1")
	e.Put(string(key), start-hour, true, 0, store.Lanes{NeverRendered: true})
	render := func(body string, sig *wire.Signals) {
		t.Helper()
		l := WireLeaseOf(e, key)
		if st, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte(body), Signals: sig,
			Headers: map[string]string{"content-type": "text/html; charset=utf-8"}, Lease: l}}); err != nil || st.Applied != 1 {
			t.Fatalf("apply: %+v %v", st, err)
		}
		e.Advance(set().ReleaseGrace.Milliseconds() + 1)
	}
	render("<title>Shoe</title><p>good</p>", nil)
	render("<p>Something went wrong</p>", &wire.Signals{Exceptions: 1, FailedRequests: 2})

	call := func(method, path, body string) (int, []byte, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header
	}
	var ex wire.Explanation
	if code, b, _ := call("GET", "/v1/targets?url=https://shop.test/p/1", ""); code != 200 || json.Unmarshal(b, &ex) != nil || ex.Verdict == nil {
		t.Fatalf("explain: %d %s", code, b)
	}
	if v := ex.Verdict; v.Result != "suspect" || strings.Join(v.Reasons, ",") != "exception,failed_request,lost_title" || v.Agree == nil || v.Agree.Count != 1 || v.Marked || v.AtMs == 0 {
		t.Fatalf("explained verdict %+v", *v)
	}

	var list wire.SuspectList
	if code, b, _ := call("GET", "/v1/suspects?site=SHOP.test", ""); code != 200 || json.Unmarshal(b, &list) != nil {
		t.Fatalf("list: %d %s", code, b)
	}
	if len(list.Suspects) != 1 || list.Suspects[0].URL != "https://shop.test/p/1" || list.Suspects[0].Device != "desktop" ||
		list.Suspects[0].AgreeCount != 1 || list.Suspects[0].Bytes != len("<p>Something went wrong</p>") || list.Site != "shop.test" {
		t.Fatalf("list %+v", list)
	}
	if code, b, _ := call("GET", "/v1/suspects?site=other.test", ""); code != 200 || !strings.Contains(string(b), `"suspects":[]`) {
		t.Fatalf("another site's list: %d %s", code, b)
	}
	code, b, h := call("GET", "/v1/suspects/page?url=https://shop.test/p/1", "")
	if code != 200 || string(b) != "<p>Something went wrong</p>" || h.Get("Content-Security-Policy") != PageCSP || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("suspect page: %d %q %v", code, b, h)
	}

	for _, c := range []struct{ method, path, body, field string }{
		{"GET", "/v1/suspects?site=", "", "site"},
		{"GET", "/v1/suspects/page?url=https://shop.test/none", "", "url"},
		{"GET", "/v1/suspects/page?url=ftp://x", "", "url"},
		{"POST", "/v1/suspects/accept", `{}`, "url"},
		{"POST", "/v1/suspects/accept", `{"url": "https://shop.test/p/1", "device": "toaster"}`, "device"},
		{"POST", "/v1/suspects/accept", `{"url": "https://shop.test/p/1", "mode": 1}`, "mode"},
		{"POST", "/v1/suspects/accept", `{"url": "https://shop.test/p/2"}`, "url"},
		{"POST", "/v1/suspects/accept", `{"url": 7}`, "url"},
	} {
		code, b, _ := call(c.method, c.path, c.body)
		var ae struct{ Error, Field string }
		if code < 400 || code > 499 || json.Unmarshal(b, &ae) != nil || ae.Field != c.field {
			t.Errorf("%s %s %s: %d %s, want a 4xx naming %s", c.method, c.path, c.body, code, b, c.field)
		}
	}
	if pg, _ := e.Store.GetPage(key); string(pg.Body) != "<title>Shoe</title><p>good</p>" {
		t.Fatalf("the refused requests changed the page: %q", pg.Body)
	}

	if code, b, _ := call("POST", "/v1/suspects/accept", `{"url": "https://shop.test/p/1", "device": "desktop"}`); code != 200 {
		t.Fatalf("accept: %d %s", code, b)
	}
	if pg, _ := e.Store.GetPage(key); string(pg.Body) != "<p>Something went wrong</p>" {
		t.Fatalf("after accept the page is %q", pg.Body)
	}
	var after wire.Explanation
	if code, b, _ := call("GET", "/v1/targets?url=https://shop.test/p/1", ""); code != 200 || json.Unmarshal(b, &after) != nil || after.Verdict.Result != "good" || after.Verdict.Agree != nil {
		t.Fatalf("explain after accept: %d %s", code, b)
	}
	if code, _, _ := call("GET", "/v1/suspects/page?url=https://shop.test/p/1", ""); code != 404 {
		t.Fatalf("the accepted suspect is still kept: %d", code)
	}
}

// WireLeaseOf grants key a lease for a result, in its wire form.
func WireLeaseOf(e *qtest.Env, key []byte) wire.Lease { return intake.WireLease(e.Grant(key)) }
