package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// A result carries at most MaxResultHeaders headers, in JSON and in the binary batch: one body
// within MaxResultsBody must not decode into millions of map entries. 64 pass, 65 are refused
// with 400 naming results[i].headers, before anything is decoded.
func TestResultHeadersAreCapped(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	_, srv := resultsServer(t, e)
	key := []byte("desktop|https://a.test/h")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	headers := func(n int) map[string]string {
		h := make(map[string]string, n)
		for i := range n {
			h[fmt.Sprintf("x-h%d", i)] = "v"
		}
		return h
	}
	for _, n := range []int{wire.MaxResultHeaders, wire.MaxResultHeaders + 1} {
		r := wire.Result{Key: key, Outcome: "ok", Status: 200, Headers: headers(n), Lease: grant(t, e, key)}
		okey := []byte("desktop|https://a.test/other") // a never-granted lease: fenced, not refused
		other := wire.Result{Key: okey, Outcome: "timeout", Lease: wire.Lease{KeyHash: shm.KeyHash(okey)}}
		for _, tc := range []struct {
			path, ctype string
			body        []byte
		}{
			{"/v1/results", "application/json", jsonResults(t, other, r)},
			{wire.PathResults, wire.ResultsContentType, wire.EncodeResults(nil, []wire.Result{other, r})},
		} {
			ans := postResults(t, srv, tc.path, tc.ctype, tc.body)
			if n > wire.MaxResultHeaders {
				if ans.Code != http.StatusBadRequest || ans.Field != "results[1].headers" {
					t.Errorf("%s %d headers: %+v, want 400 naming results[1].headers", tc.ctype, n, ans)
				}
				continue
			}
			if ans.Code == http.StatusBadRequest {
				t.Errorf("%s %d headers: %+v, want it decoded", tc.ctype, n, ans)
			}
		}
		e.Advance(60_000) // past the release grace of the first apply
	}
}

// The reviewer's body: 40 MiB of JSON whose one result carries millions of distinct header
// names. It is refused (400 naming results[0].headers), and the peak heap while it is read,
// scanned and refused stays within twice the body.
//
//	go test -run TestResultsManyHeadersHeap -v ./api/
func TestResultsManyHeadersHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~100 MiB")
	}
	e := qtest.New(t, "", start, shm.Options{})
	a := intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	const size = 40 << 20
	var b bytes.Buffer
	b.Grow(size + 256)
	b.WriteString(`{"results": [{"key": "desktop|https://a.test/h", "outcome": "ok", "status": 200, "headers": {`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"h%d":""`, i)
	}
	b.WriteString(`}, "lease": {"slot": 0, "state": 1, "key_hash": 1}}]}`)
	body := b.Bytes()
	var ans resultsAnswer
	base, peak := qtest.PeakHeapEvery(time.Millisecond, func() {
		ans = postResultsTo(t, resultsHandler(a, nil, false), "application/json", body)
	})
	grew := peak - min(base, peak)
	t.Logf("a %.1f MiB results body of many headers: %d, peak heap %.1f MiB above base (%.2f× the body)",
		qtest.MiB(uint64(len(body))), ans.Code, qtest.MiB(grew), float64(grew)/float64(len(body)))
	if ans.Code != http.StatusBadRequest || ans.Field != "results[0].headers" {
		t.Fatalf("many headers: %+v, want 400 naming results[0].headers", ans)
	}
	if grew > 2*uint64(len(body)) {
		t.Fatalf("peak heap grew by %.1f MiB for a %.1f MiB body: over 2×", qtest.MiB(grew), qtest.MiB(uint64(len(body))))
	}
}

// postResultsTo serves one results request to h in process, as worker 0's mux would.
func postResultsTo(t *testing.T, h http.HandlerFunc, ctype string, body []byte) resultsAnswer {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/results", bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	w := httptest.NewRecorder()
	h(w, req)
	out := resultsAnswer{Code: w.Code}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("answer %d: %v", w.Code, err)
	}
	return out
}
