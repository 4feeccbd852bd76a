package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/intaketest"
	"github.com/freshq/freshq/testkit/qtest"
)

// POST /recache checks the whole list before it writes: a key over the store's limit (400) or
// a host render.domains does not name (404, as render on miss answers it) refuses the request,
// naming urls[i] (url for the one-URL form), and nothing is filed or rushed, whatever URLs came
// before it. A list that passes is filed and rushed whole.
func TestRecacheIsAllOrNothing(t *testing.T) {
	e := qtest.New(t, "render:\n  domains: [a.test]\nroutes:\n  - {name: catalog, match: prefix, path: /c/, interval: 24h, swr: 6h}\n", start, shm.Options{})
	targets := intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg,
		Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	mux := http.NewServeMux()
	(&Operate{Targets: targets}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	post := func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/recache", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	prefix := "https://a.test/c/long?x="
	long := prefix + strings.Repeat("a", store.MaxKeyLen+1-len("desktop|")-len(prefix))
	for _, tc := range []struct {
		body  string
		code  int
		field string
	}{
		{`{"urls": ["https://a.test/c/1", "https://a.test/c/2", "` + long + `"]}`, 400, "urls[2]"},
		{`{"url": "` + long + `"}`, 400, "url"},
		{`{"urls": ["https://a.test/c/1", "https://b.test/c/2"]}`, 404, "urls[1]"},
		{`{"urls": ["https://a.test/c/1", "https://a.test.b.test/c/2"]}`, 404, "urls[1]"},
		{`{"url": "https://b.test/c/2"}`, 404, "url"},
	} {
		code, out := post(tc.body)
		if code != tc.code || out["field"] != tc.field || out["error"] == "" {
			t.Errorf("%.60s: %d %v, want %d naming %s", tc.body, code, out, tc.code, tc.field)
		}
		if rows := e.AllRows(); len(rows) != 0 {
			t.Fatalf("%.60s: refused, yet %d rows were filed (first %q)", tc.body, len(rows), rows[0].Key)
		}
	}
	// The longest key the store holds passes.
	ok := prefix + strings.Repeat("a", store.MaxKeyLen-len("desktop|")-len(prefix))
	// It names no device: each URL is filed and rushed for desktop and mobile.
	if code, out := post(`{"urls": ["https://a.test/c/1", "` + ok + `"]}`); code != 200 || out["rushed"] != 4.0 {
		t.Fatalf("a valid list: %d %v", code, out)
	}
	if rows := e.AllRows(); len(rows) != 4 {
		t.Fatalf("a valid list of two filed %d rows, want 2 URLs × 2 devices", len(rows))
	}
}
