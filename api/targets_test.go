package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/testkit/intaketest"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

func targetsServer(t *testing.T) (*qtest.Env, *httptest.Server) {
	// The explanations asserted are ready's (score = lateness ÷ cadence × boost).
	e := qtest.New(t, "queue: {policy: ready}\nrender: {user_agents: {tablet: \"freshq-tablet/1\"}}\n", start, shm.Options{})
	mux := http.NewServeMux()
	(&Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}).Register(mux)
	(&Queue{Seg: e.Seg, Now: e.Now}).Register(mux)
	(&Explain{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return e, srv
}

func postTargets(t *testing.T, srv *httptest.Server, body string) (int, wire.TargetsResponse) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v1/targets", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out wire.TargetsResponse
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
	if err != nil || row.DueAtMs != start || !row.Submitted || row.EffectiveIntervalMs != 6*hour || !row.NeverRendered {
		t.Fatalf("normalized sitemap row %+v %v", row, err)
	}
	if tg, _ := e.Store.GetTarget([]byte("desktop|https://shop.test/c/shoes")); tg.Source != store.SourceSitemap || tg.StoredIntervalMs != 6*hour {
		t.Fatalf("target %+v", tg)
	}
	if row, _ := e.Store.GetSchedule([]byte("mobile|https://shop.test/p/1")); row.EffectiveIntervalMs != hour || !row.Submitted {
		t.Fatalf("api row (submitted) %+v", row)
	}
	if row, _ := e.Store.GetSchedule([]byte("tablet|https://shop.test/blog")); row.Submitted || row.DueAtMs != 1798859045000 {
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
	want := map[int]string{0: "url", 1: "url", 2: "url", 4: "interval", 5: "interval", 6: "device", 7: "source", 8: "due", 9: "colour"}
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

func TestQueueView(t *testing.T) {
	e, srv := targetsServer(t)
	e.Seg.Floor().Lower(-5)
	resp, err := http.Get(srv.URL + "/v1/queue")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v wire.QueueView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.Floor.Ms != -5 || !v.Ready.Enabled || len(v.Backlog) != 4 || v.Leases.Capacity == 0 {
		t.Fatalf("%+v %v", v, err)
	}
}

// A key named twice in one request: the items apply in order, the later merged over the earlier
// (what it omits keeps the earlier item's value), and both are reported as landed.
func TestPostTargetsRepeatedKeyMergesInOrder(t *testing.T) {
	e, srv := targetsServer(t)
	code, out := postTargets(t, srv, `[
		{"url": "https://shop.test/a", "interval": "12h"},
		{"url": "https://shop.test/b"},
		{"url": "https://shop.test/a", "source": "discovered", "due": "2027-01-01T00:00:00Z"}
	]`)
	if code != 200 || out.Accepted != 3 || out.Merged != 1 || out.Rejected != 0 {
		t.Fatalf("%d %+v", code, out)
	}
	row, err := e.Store.GetSchedule([]byte("desktop|https://shop.test/a"))
	if err != nil || row.EffectiveIntervalMs != 12*hour || row.DueAtMs != 1798761600000 || row.Submitted {
		t.Fatalf("the repeat dropped the first item's fields: %+v %v", row, err)
	}
	if tg, _ := e.Store.GetTarget([]byte("desktop|https://shop.test/a")); tg.Source != store.SourceDiscovered || tg.StoredIntervalMs != 12*hour {
		t.Fatalf("target %+v", tg)
	}
}

// A body that stops being JSON after 1,000 items landed says so: the count of what landed, and
// the index where it stopped.
func TestPostTargetsSyntaxErrorReportsWhatLanded(t *testing.T) {
	e, srv := targetsServer(t)
	var b strings.Builder
	b.WriteString("[")
	for i := range 1001 {
		fmt.Fprintf(&b, `{"url": "https://shop.test/p/%d"},`, i)
	}
	b.WriteString(`{"url": "https://shop.test/q"]`) // a bracket that does not match
	resp, err := http.Post(srv.URL+"/v1/targets", "application/json", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out wire.TargetsResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || out.Accepted != 1001 || out.Error == "" || out.StoppedAt == nil || *out.StoppedAt != 1001 {
		t.Fatalf("%d %+v", resp.StatusCode, out)
	}
	if _, err := e.Store.GetSchedule([]byte("desktop|https://shop.test/p/1000")); err != nil {
		t.Fatalf("item 1000 did not land: %v", err)
	}
	// A break between items (not inside one) stops the body the same way.
	code, out := postTargets(t, srv, `[{"url": "https://shop.test/x"} {"url": "https://shop.test/y"}]`)
	if code != 400 || out.Accepted != 1 || out.StoppedAt == nil || *out.StoppedAt != 1 {
		t.Fatalf("missing comma: %d %+v", code, out)
	}
}

func TestPostTargetsBodyShapes(t *testing.T) {
	_, srv := targetsServer(t)
	// Trailing garbage after the array is an error, reported with what landed.
	code, out := postTargets(t, srv, `[{"url": "https://shop.test/a"}] garbage`)
	if code != 400 || out.Accepted != 1 || out.Error == "" {
		t.Fatalf("trailing garbage: %d %+v", code, out)
	}
	// A pretty-printed single object is one item.
	code, out = postTargets(t, srv, "{\n  \"url\": \"https://shop.test/pretty\",\n  \"interval\": \"6h\"\n}\n")
	if code != 200 || out.Accepted != 1 || out.Rejected != 0 {
		t.Fatalf("pretty-printed object: %d %+v", code, out)
	}
	// A due time before 2000 or after 2100 is refused naming due: 1970 would be granted first.
	for _, due := range []string{"1970-01-01T00:00:00Z", "1999-12-31T23:59:59Z", "2100-01-01T00:00:01Z"} {
		code, out = postTargets(t, srv, `{"url": "https://shop.test/due", "due": "`+due+`"}`)
		// Nothing accepted: a 400 whose error says so, beside the item report (every error
		// answer carries one).
		if code != 400 || out.Rejected != 1 || out.Errors[0].Field != "due" || !strings.Contains(out.Error, "no item accepted") {
			t.Fatalf("due %s: %d %+v", due, code, out)
		}
	}
	// An unknown field and a field of the wrong type are named.
	code, out = postTargets(t, srv, `[{"url": "https://shop.test/g", "colour": "red"}, {"url": 5}, {"url": "https://shop.test/ok"}]`)
	if code != 200 || out.Accepted != 1 || len(out.Errors) != 2 || out.Errors[0].Field != "colour" || out.Errors[1].Field != "url" {
		t.Fatalf("field names: %d %+v", code, out)
	}
}

// An item over MaxTargetItem is rejected by index without being held; its neighbours land. A
// body of one huge item costs the decoder its buffers, not the item.
func TestPostTargetsItemBoundedByBytes(t *testing.T) {
	e, srv := targetsServer(t)
	huge := `{"url": "https://shop.test/` + strings.Repeat("x", wire.MaxTargetItem) + `"}`
	code, out := postTargets(t, srv, `[{"url": "https://shop.test/a"}, `+huge+`, {"url": "https://shop.test/b"}]`)
	if code != 200 || out.Accepted != 2 || out.Rejected != 1 || out.Errors[0].Index != 1 || !strings.Contains(out.Errors[0].Error, "bytes") {
		t.Fatalf("%d %+v", code, out)
	}
	for _, ndjson := range []bool{false, true} {
		body := io.MultiReader(strings.NewReader(`[{"url": "https://shop.test/`), qtest.Repeat('x', 32<<20), strings.NewReader(`"}]`))
		if ndjson {
			body = io.MultiReader(strings.NewReader(`{"url": "https://shop.test/`), qtest.Repeat('x', 32<<20), strings.NewReader(`"}`))
		}
		h := &Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}
		req := httptest.NewRequest("POST", "/v1/targets", body)
		rec := httptest.NewRecorder()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		h.post(rec, req)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
			t.Errorf("ndjson %v: a 32 MiB item allocated %d bytes", ndjson, alloc)
		}
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"rejected":1`) {
			t.Errorf("ndjson %v: %d %s", ndjson, rec.Code, rec.Body)
		}
	}
}

// A body over MaxTargetsBody is 413, and still reports what landed before the limit.
func TestPostTargetsOverBodyLimitReportsWhatLanded(t *testing.T) {
	e, _ := targetsServer(t)
	body := io.MultiReader(strings.NewReader(`[{"url": "https://shop.test/a"}, `), qtest.Repeat(' ', wire.MaxTargetsBody), strings.NewReader(`{"url": "https://shop.test/b"}]`))
	req := httptest.NewRequest("POST", "/v1/targets", body)
	rec := httptest.NewRecorder()
	(&Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}).post(rec, req)
	var out wire.TargetsResponse
	json.Unmarshal(rec.Body.Bytes(), &out)
	if rec.Code != http.StatusRequestEntityTooLarge || out.Accepted != 1 || out.Error == "" || out.StoppedAt == nil || *out.StoppedAt != 1 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}
