package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/invariants"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// grant leases key for a result that is to be applied (qtest.Env.Grant), in its wire form.
func grant(t testing.TB, e *qtest.Env, key []byte) wire.Lease {
	t.Helper()
	return intake.WireLease(e.Grant(key))
}

// resultsServer serves the results endpoints over e: the internal one (binary or JSON) and
// POST /v1/results (JSON only), with worker 0's key locks.
func resultsServer(t *testing.T, e *qtest.Env) (*apply.Applier, *httptest.Server) {
	t.Helper()
	a := intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.PathResults, resultsHandler(a, nil, true))
	mux.HandleFunc("POST /v1/results", resultsHandler(a, nil, false))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return a, srv
}

type resultsAnswer struct {
	Code int
	wire.ApplyStats
	Error string `json:"error"`
	Field string `json:"field"`
}

func postResults(t *testing.T, srv *httptest.Server, path, ctype string, body []byte) resultsAnswer {
	t.Helper()
	resp, err := http.Post(srv.URL+path, ctype, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := resultsAnswer{Code: resp.StatusCode}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("answer %d: %v", resp.StatusCode, err)
	}
	return out
}

func jsonResults(t testing.TB, rs ...wire.Result) []byte {
	b, err := json.Marshal(wire.ResultsRequest{Results: rs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encodings posts rs both ways a results batch travels: binary on the internal path, JSON on
// the public one.
var encodings = []struct {
	name, path, ctype string
	encode            func(testing.TB, ...wire.Result) []byte
}{
	{"binary", wire.PathResults, wire.ResultsContentType, func(_ testing.TB, rs ...wire.Result) []byte { return wire.EncodeResults(nil, rs) }},
	{"json", "/v1/results", "application/json", jsonResults},
}

// A lease that arrives from outside is checked before anything: a slot past the table (which
// crashed worker 0 in Release) or a key hash that is not the key's is a 400 naming the lease,
// and nothing of the batch is applied, not even its good results.
func TestResultsWithAForgedLeaseAreRefusedWhole(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{LeaseCapacity: 64})
	_, srv := resultsServer(t, e)
	good, bad := []byte("desktop|https://a.test/c/1"), []byte("desktop|https://a.test/c/2")
	e.Put(string(good), start-hour, true, 0, store.Lanes{NeverRendered: true})
	e.Put(string(bad), start-hour, true, 0, store.Lanes{NeverRendered: true})
	lease := grant(t, e, good)
	badLease := grant(t, e, bad)
	for _, enc := range encodings {
		for name, forged := range map[string]wire.Lease{
			"slot = capacity": {Slot: 64, State: badLease.State, KeyHash: badLease.KeyHash},
			"slot 2^32-1":     {Slot: 1<<32 - 1, State: badLease.State, KeyHash: badLease.KeyHash},
			"another key":     {Slot: badLease.Slot, State: badLease.State, KeyHash: lease.KeyHash},
			"no lease at all": {},
		} {
			ans := postResults(t, srv, enc.path, enc.ctype, enc.encode(t,
				wire.Result{Key: good, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: lease},
				wire.Result{Key: bad, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: forged}))
			if ans.Code != http.StatusBadRequest || ans.Field != "results[1].lease" {
				t.Fatalf("%s, %s: %+v, want 400 naming results[1].lease", enc.name, name, ans)
			}
		}
	}
	if _, err := e.Store.GetPage(good); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the good result of a refused batch was applied: %v", err)
	}
	if err := e.Seg.Leases().Check(intake.ShmLease(lease), shm.KeyHash(good), e.Now()); err != nil {
		t.Fatalf("the good result's lease was touched: %v", err)
	}
}

// Status and outcome are checked against what they describe: a stored page is served with its
// status, so a status HTTP cannot send must never get that far.
func TestResultsStatusAndOutcomeAreValidated(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	_, srv := resultsServer(t, e)
	key := []byte("desktop|https://a.test/c/1")
	e.Put(string(key), start-hour, true, 0, store.Lanes{NeverRendered: true})
	lease := grant(t, e, key)
	for _, tc := range []struct {
		r     wire.Result
		field string
	}{
		{wire.Result{Outcome: "ok", Status: 0}, "results[0].status"},
		{wire.Result{Outcome: "ok", Status: 99}, "results[0].status"},
		{wire.Result{Outcome: "ok", Status: 100}, "results[0].status"}, // informational: never a page
		{wire.Result{Outcome: "ok", Status: 199}, "results[0].status"},
		{wire.Result{Outcome: "timeout", Status: 103}, "results[0].status"},
		{wire.Result{Outcome: "ok", Status: 600}, "results[0].status"},
		{wire.Result{Outcome: "not_found", Status: 0}, "results[0].status"},
		{wire.Result{Outcome: "timeout", Status: -1}, "results[0].status"},
		{wire.Result{Outcome: "timeout", Status: 1000}, "results[0].status"},
		{wire.Result{Outcome: "bogus", Status: 200}, "results[0].outcome"},
		{wire.Result{Outcome: "OK", Status: 200}, "results[0].outcome"},
		{wire.Result{Outcome: "", Status: 200}, "results[0].outcome"},
		{wire.Result{Outcome: "ok", Status: 200, DurationMs: -5}, "results[0].duration_ms"},
		{wire.Result{Key: []byte(strings.Repeat("k", store.MaxKeyLen+1)), Outcome: "ok", Status: 200}, "results[0].key"},
		{wire.Result{Key: []byte{}, Outcome: "ok", Status: 200}, "results[0].key"},
	} {
		r := tc.r
		if r.Key == nil {
			r.Key = key
		}
		r.Lease = lease
		for _, enc := range encodings {
			if ans := postResults(t, srv, enc.path, enc.ctype, enc.encode(t, r)); ans.Code != 400 || ans.Field != tc.field {
				t.Errorf("%s: outcome %q status %d: %+v, want 400 naming %s", enc.name, r.Outcome, r.Status, ans, tc.field)
			}
		}
	}
	// 0 is the status of an outcome that had no response.
	ans := postResults(t, srv, "/v1/results", "application/json", jsonResults(t, wire.Result{Key: key, Outcome: "timeout", Lease: lease}))
	if ans.Code != 200 || ans.Applied != 1 {
		t.Fatalf("a timeout without a status: %+v", ans)
	}
}

// The example: one 404 posted twice sealed a sitemap page as gone for 14 days (gone
// takes two strikes). The second delivery carries a lease the first one released: fenced, 409,
// nothing changed.
func TestADuplicateResultIsFenced(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	_, srv := resultsServer(t, e)
	key := []byte("desktop|https://a.test/c/1")
	e.Put(string(key), start-hour, true, 0, store.Lanes{})
	body := jsonResults(t, wire.Result{Key: key, Outcome: "not_found", Status: 404, Lease: grant(t, e, key)})
	if ans := postResults(t, srv, "/v1/results", "application/json", body); ans.Code != 200 || ans.Applied != 1 {
		t.Fatalf("first delivery: %+v", ans)
	}
	rowAfterFirst, _ := e.Store.GetSchedule(key)
	e.Advance(1000)
	ans := postResults(t, srv, "/v1/results", "application/json", body)
	if ans.Code != http.StatusConflict || ans.Field != "results[0].lease" || ans.Fenced != 1 || ans.Applied != 0 {
		t.Fatalf("second delivery: %+v, want 409 naming results[0].lease", ans)
	}
	tgt, _ := e.Store.GetTarget(key)
	if tgt.Failures.Count != 1 || tgt.Terminal != store.TerminalNone {
		t.Fatalf("a duplicate counted: failures %+v, terminal %v", tgt.Failures, tgt.Terminal)
	}
	if row, _ := e.Store.GetSchedule(key); row != rowAfterFirst {
		t.Fatalf("a duplicate moved the row: %+v, was %+v", row, rowAfterFirst)
	}
}

// A lease that lapsed, was released or was never granted fences its result; the others of the
// batch apply, and the answer says which were fenced and why.
func TestResultsFencedOneByOne(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	_, srv := resultsServer(t, e)
	keys := make([][]byte, 4)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "desktop|https://a.test/c/%d", i)
		e.Put(string(keys[i]), start-hour, true, 0, store.Lanes{NeverRendered: true})
	}
	lapsing, _ := e.Seg.Leases().Acquire(shm.KeyHash(keys[1]), e.Now(), 1000, 1)
	released := grant(t, e, keys[2])
	e.Seg.Leases().Release(intake.ShmLease(released), e.Now(), 0)
	never := wire.Lease{Slot: 3, State: 1<<40 | 5, KeyHash: shm.KeyHash(keys[3])}
	held := grant(t, e, keys[0])
	e.Advance(1000)
	rs := []wire.Result{
		{Key: keys[0], Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: held},
		{Key: keys[1], Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: intake.WireLease(lapsing)},
		{Key: keys[2], Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: released},
		{Key: keys[3], Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: never},
		{Key: keys[0], Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: held}, // the same twice
	}
	ans := postResults(t, srv, wire.PathResults, wire.ResultsContentType, wire.EncodeResults(nil, rs))
	if ans.Code != 200 || ans.Applied != 1 || ans.Fenced != 4 || len(ans.FencedItems) != 4 {
		t.Fatalf("answer %+v", ans)
	}
	for i, it := range ans.FencedItems {
		if it.Index != i+1 || it.Field != fmt.Sprintf("results[%d].lease", i+1) || it.Error == "" {
			t.Fatalf("fenced item %d: %+v", i, it)
		}
	}
	for _, k := range keys[1:] {
		if _, err := e.Store.GetPage(k); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s: a fenced result stored its page", k)
		}
	}
	// The render worker's client reads an all-fenced batch as nothing left to deliver.
	sock := serve(t, e)
	st, err := sock.SendResults(t.Context(), rs[1:2])
	if err != nil || st.Fenced != 1 {
		t.Fatalf("SendResults of a fenced batch: %+v %v", st, err)
	}
}

// The JSON form is scanned before it is decoded: an unknown field is named, and a body of
// tiny results cannot decode into gigabytes.
func TestResultsJSONIsBoundedBeforeDecoding(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	_, srv := resultsServer(t, e)
	for _, tc := range []struct{ body, field string }{
		{`{"results": [{"key": "aw==", "outcome": "ok", "lease": {"slto": 1}}]}`, "results[0].lease.slto"},
		{`{"results": [{}, {"key": "aw==", "color": "red"}]}`, "results[1].color"},
		{`{"results": [], "extra": 1}`, "extra"},
		{`{"results": [` + strings.Repeat("{},", wire.MaxResults) + `{}]}`, "results"},
		{`{"results": [` + strings.Repeat("1,", wire.MaxResults) + `1]}`, "results"},
	} {
		if ans := postResults(t, srv, "/v1/results", "application/json", []byte(tc.body)); ans.Code != 400 || ans.Field != tc.field {
			t.Errorf("%.80s: %+v, want 400 naming %s", tc.body, ans, tc.field)
		}
	}
	// Field names match as encoding/json matches them, and headers may be named anything.
	ok := `{"Results": [{"KEY": "aw==", "outcome": "timeout", "headers": {"x-anything": "1"}, "lease": {"Slot": 0}}]}`
	if field, err := scanResultsJSON([]byte(ok)); err != nil {
		t.Fatalf("scan of a good body: %s %v", field, err)
	}
	over := bytes.Repeat([]byte(" "), wire.MaxResultsBody+1)
	if ans := postResults(t, srv, "/v1/results", "application/json", over); ans.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over MaxResultsBody: %+v", ans)
	}
}

// MaxResultsBody holds one result with the largest page the store keeps, in JSON.
func TestMaxResultsBodyHoldsTheLargestPageInJSON(t *testing.T) {
	r := wire.Result{Key: []byte(strings.Repeat("k", store.MaxKeyLen)), Outcome: "ok", Status: 200, Body: make([]byte, store.MaxPageBody),
		Headers: map[string]string{"content-type": strings.Repeat("t", store.MaxHeaderLen)}}
	if n := len(jsonResults(t, r)); n > wire.MaxResultsBody {
		t.Fatalf("the largest page's JSON result is %d bytes, over MaxResultsBody %d", n, wire.MaxResultsBody)
	}
	if n := base64.StdEncoding.EncodedLen(store.MaxPageBody); n > wire.MaxResultsBody-4<<20 {
		t.Fatalf("less than 4 MiB of room beside a base64 page of %d bytes", n)
	}
}

// What worker 0 allocates to take a JSON results body at the limit: one result carrying a
// 32 MiB page (a 43 MiB body), decoded as the handler does, against the json.Decoder that
// decoded it before. The figure is logged; the bound keeps it within 2x the body (3x under the
// race detector).
func TestResultsJSONMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~100 MiB")
	}
	e := qtest.New(t, "", start, shm.Options{})
	key := []byte("desktop|https://a.test/c/1")
	e.Put(string(key), start-hour, true, 0, store.Lanes{NeverRendered: true})
	body := jsonResults(t, wire.Result{Key: key, Outcome: "ok", Status: 200, Body: bytes.Repeat([]byte("<p>x</p>"), store.MaxPageBody/8), Lease: grant(t, e, key)})
	measure := func(decode func(w http.ResponseWriter, r *http.Request) bool) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		req := httptest.NewRequest(http.MethodPost, "/v1/results", bytes.NewReader(body))
		if !decode(httptest.NewRecorder(), req) {
			t.Fatal("decode failed")
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	now := measure(func(w http.ResponseWriter, r *http.Request) bool {
		rs, err := readResults(w, r, false)
		return err == nil && len(rs) == 1 && len(rs[0].Body) == store.MaxPageBody
	})
	was := measure(func(w http.ResponseWriter, r *http.Request) bool {
		var req wire.ResultsRequest
		return decodeJSON(w, r, &req, 256<<20) == nil && len(req.Results) == 1
	})
	t.Logf("JSON results body of %.1f MiB: %.1f MiB allocated (%.2fx), was %.1f MiB (%.2fx) with json.Decoder",
		qtest.MiB(uint64(len(body))), qtest.MiB(now), float64(now)/float64(len(body)), qtest.MiB(was), float64(was)/float64(len(body)))
	bound := uint64(2)
	if invariants.Race {
		bound = 3 // still below what json.Decoder cost without the race detector
	}
	if now > bound*uint64(len(body)) {
		t.Fatalf("%.1f MiB allocated for a %.1f MiB body: over %dx", qtest.MiB(now), qtest.MiB(uint64(len(body))), bound)
	}
}
