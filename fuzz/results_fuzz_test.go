package fuzz

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/assemble/settings"
	"github.com/freshq/freshq/testkit/intaketest"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// FuzzResultsDecode feeds arbitrary bodies to worker 0's decoder of the binary results batch
// (POST /internal/results): never a panic; a refusal is one of the three marked errors; an
// accepted batch holds no more results than its bytes can, and re-encoding what was decoded
// decodes to the same results (their signals included), in one canonical encoding.
func FuzzResultsDecode(f *testing.F) {
	full := wire.EncodeResults(nil, []wire.Result{
		{Key: []byte("desktop|https://a.test/c/1"), Outcome: "ok", Status: 200, Stage: "body", DurationMs: 87,
			Headers: map[string]string{"content-type": "text/html", "etag": `"v1"`}, Body: []byte("<html>1</html>"),
			Lease:   wire.Lease{Slot: 17, State: 1<<40 | 3, KeyHash: 0x9e3779b97f4a7c15},
			Signals: &wire.Signals{Exceptions: 1, FailedRequests: 2, Cold: true, Evidence: []string{"TypeError: p is null"}}},
		{Key: []byte("mobile|https://a.test/x"), Outcome: "timeout", Stage: "dial", DurationMs: 60_000, Err: "dial tcp: i/o timeout"},
		{Key: []byte("k"), Outcome: "not_found", Status: 404},
	})
	f.Add(full)
	for _, n := range []int{0, 3, 4, 5, 9, len(full) / 2, len(full) - 17, len(full) - 1} {
		f.Add(full[:n]) // cut mid-result, as a dropped connection leaves it
	}
	f.Add(wire.EncodeResults(nil, nil))
	other := bytes.Clone(full)
	other[3]++ // another version
	f.Add(other)
	f.Add([]byte(`{"results": []}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rs, err := wire.DecodeResults(body)
		if err != nil {
			if rs != nil {
				t.Fatal("results with an error")
			}
			if !errors.Is(err, wire.ErrResultsMagic) && !errors.Is(err, wire.ErrResultsVersion) && !errors.Is(err, wire.ErrResultsCorrupt) {
				t.Fatalf("unmarked error: %v", err)
			}
			return
		}
		if len(rs)*26 > len(body) { // wire's smallest result
			t.Fatalf("%d results from %d bytes", len(rs), len(body))
		}
		canon := wire.EncodeResults(nil, rs)
		again, err := wire.DecodeResults(canon)
		if err != nil {
			t.Fatalf("re-encoded batch refused: %v", err)
		}
		if len(rs) > 0 && !reflect.DeepEqual(again, rs) {
			t.Fatalf("re-encoded batch decodes to\n%+v\nnot\n%+v", again, rs)
		}
		if !bytes.Equal(wire.EncodeResults(nil, again), canon) {
			t.Fatal("two encodings of one batch")
		}
	})
}

// FuzzResultsEndpoint posts results made of fuzz bytes (keys, outcomes, statuses, durations
// and lease words, in the binary form or in JSON) to worker 0's real results handler over a
// small store and segment: never a panic; every answer is 200, 400 or 409 with a JSON body (413
// cannot happen at these sizes); and a 400 or a 409 changes nothing: no row, target, page or
// lease of the store moves. Some results carry the real lease of their key, so the applying
// path runs too.
func FuzzResultsEndpoint(f *testing.F) {
	e := qtest.New(f, "", 1_800_000_000_000, shm.Options{LeaseCapacity: 16, LeaseWindow: 4})
	keys := [][]byte{[]byte("desktop|https://a.test/c/0"), []byte("desktop|https://a.test/c/1"), []byte("mobile|https://a.test/c/2")}
	for _, k := range keys {
		e.Put(string(k), e.Now()-qtest.Hour, true, 0, store.Lanes{NeverRendered: true})
	}
	mux := http.NewServeMux()
	(&api.Control{Applier: intaketest.Applier(f, apply.ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, settings.IntakeSettings), Now: e.Now, Log: qtest.Log(nil)}),
		Status: func() wire.Status { return wire.Status{} }}).Register(mux)

	// seed: json?, then per result 24 bytes: key, outcome, status (2), real lease?, slot (4),
	// state (8), key hash (8).
	seed := func(asJSON byte, rs ...[]byte) []byte { return append([]byte{asJSON}, bytes.Join(rs, nil)...) }
	one := func(key, outcome byte, status uint16, real byte, slot uint32, state, hash uint64) []byte {
		b := []byte{key, outcome}
		b = binary.LittleEndian.AppendUint16(b, status)
		b = append(b, real)
		b = binary.LittleEndian.AppendUint32(b, slot)
		b = binary.LittleEndian.AppendUint64(b, state)
		return binary.LittleEndian.AppendUint64(b, hash)
	}
	f.Add(seed(0, one(0, 0, 200, 1, 0, 0, 0)))                                  // a good result
	f.Add(seed(1, one(1, 0, 200, 0, 16, 1<<40, 0)))                             // slot = capacity
	f.Add(seed(0, one(2, 2, 404, 0, 1<<32-1, 1<<40, 0)))                        // slot = 2^32-1
	f.Add(seed(0, one(0, 0, 200, 0, 3, 0, 0)))                                  // state 0: never granted
	f.Add(seed(1, one(0, 0, 0, 1, 0, 0, 0), one(1, 250, 1000, 1, 0, 0, 0)))     // status 0 for ok; a bogus outcome
	f.Add(seed(0, one(0, 6, 0, 1, 0, 0, 0), one(0, 6, 0, 1, 0, 0, 0)))          // the same key twice
	f.Add(seed(2, one(0, 0, 200, 1, 0, 0, 0), one(1, 0, 200, 1, 0, 0, 0))[:30]) // truncated mid-result
	f.Add(seed(3, one(0, 0, 200, 1, 0, 0, 0))[:7])                              // truncated early
	outcomeNames := []string{"ok", "noindex", "not_found", "gone", "client_error", "server_error", "timeout", "network",
		"redirect_loop", "too_large", "blocked", "failed"}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		mode, data := data[0], data[1:]
		var rs []wire.Result
		for len(data) >= 25 {
			d := data[:25]
			data = data[25:]
			r := wire.Result{Key: keys[int(d[0])%len(keys)], Status: int(int16(binary.LittleEndian.Uint16(d[2:])))}
			if d[0] >= 128 {
				r.Key = append([]byte(nil), d[0]) // a key that is no row
			}
			if int(d[1]) < len(outcomeNames) {
				r.Outcome = outcomeNames[d[1]]
			} else {
				r.Outcome = string(d[1:2])
			}
			if d[4]&1 != 0 {
				if l, st := e.Seg.Leases().Acquire(shm.KeyHash(r.Key), e.Now(), 600_000, 1); st == shm.Acquired {
					r.Lease = wire.Lease{Slot: l.Slot, State: l.State, KeyHash: l.KeyHash}
				}
			} else {
				r.Lease = wire.Lease{Slot: binary.LittleEndian.Uint32(d[5:]), State: binary.LittleEndian.Uint64(d[9:]), KeyHash: binary.LittleEndian.Uint64(d[17:])}
			}
			if d[4]&2 != 0 {
				r.Body = []byte("<html>fuzz</html>")
			}
			rs = append(rs, r)
		}
		var body []byte
		ctype := wire.ResultsContentType
		switch mode % 4 {
		case 0:
			body = wire.EncodeResults(nil, rs)
		case 1:
			body, _ = json.Marshal(map[string]any{"results": rs})
			ctype = "application/json"
		case 2: // the binary batch cut short
			body = wire.EncodeResults(nil, rs)
			body = body[:len(body)*int(mode)/256]
		case 3: // JSON cut short
			body, _ = json.Marshal(map[string]any{"results": rs})
			body = body[:len(body)*int(mode)/256]
			ctype = "application/json"
		}
		before := snapshot(t, e, keys)
		req := httptest.NewRequest(http.MethodPost, wire.PathResults, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		var answer map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
			t.Fatalf("%d answer is not JSON: %q", rec.Code, rec.Body.Bytes())
		}
		switch rec.Code {
		case 200:
		case 400, 409:
			if after := snapshot(t, e, keys); after != before {
				t.Fatalf("a %d changed the store or the leases:\n%s\nwas\n%s", rec.Code, after, before)
			}
		default:
			t.Fatalf("answer %d %v", rec.Code, answer)
		}
		e.Advance(1) // leases and rows move on, as they would between requests
	})
}

// snapshot describes everything a results request could change for keys.
func snapshot(t *testing.T, e *qtest.Env, keys [][]byte) string {
	var b strings.Builder
	for _, k := range keys {
		row, err := e.Store.GetSchedule(k)
		fmt.Fprintf(&b, "%s row %+v %v\n", k, row, err)
		tgt, err := e.Store.GetTarget(k)
		fmt.Fprintf(&b, "  target %+v %v\n", tgt, err)
		page, err := e.Store.GetPage(k)
		fmt.Fprintf(&b, "  page %d %q %v\n", page.Status, page.Body, err)
		li, ok := e.Seg.Leases().Lookup(shm.KeyHash(k), e.Now())
		fmt.Fprintf(&b, "  lease %+v %v\n", li, ok)
	}
	fmt.Fprintf(&b, "stats %+v\n", e.Seg.Leases().Stats(e.Now()))
	return b.String()
}
