package fuzz

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/freshq/freshq/api"
)

// FuzzResultsDecode feeds arbitrary bodies to worker 0's decoder of the binary results batch
// (POST /internal/results): never a panic; a refusal is one of the three marked errors; an
// accepted batch holds no more results than its bytes can, and re-encoding what was decoded
// decodes to the same results, in one canonical encoding.
func FuzzResultsDecode(f *testing.F) {
	full := api.EncodeResults(nil, []api.Result{
		{Key: []byte("desktop|https://a.test/c/1"), Outcome: "ok", Status: 200, Stage: "body", DurationMs: 87,
			Headers: map[string]string{"content-type": "text/html", "etag": `"v1"`}, Body: []byte("<html>1</html>"),
			Lease: api.Lease{Slot: 17, State: 1<<40 | 3, KeyHash: 0x9e3779b97f4a7c15}},
		{Key: []byte("mobile|https://a.test/x"), Outcome: "timeout", Stage: "dial", DurationMs: 60_000, Err: "dial tcp: i/o timeout"},
		{Key: []byte("k"), Outcome: "not_found", Status: 404},
	})
	f.Add(full)
	for _, n := range []int{0, 3, 4, 5, 9, len(full) / 2, len(full) - 17, len(full) - 1} {
		f.Add(full[:n]) // cut mid-result, as a dropped connection leaves it
	}
	f.Add(api.EncodeResults(nil, nil))
	other := bytes.Clone(full)
	other[3]++ // another version
	f.Add(other)
	f.Add([]byte(`{"results": []}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rs, err := api.DecodeResults(body)
		if err != nil {
			if rs != nil {
				t.Fatal("results with an error")
			}
			if !errors.Is(err, api.ErrResultsMagic) && !errors.Is(err, api.ErrResultsVersion) && !errors.Is(err, api.ErrResultsCorrupt) {
				t.Fatalf("unmarked error: %v", err)
			}
			return
		}
		if len(rs)*25 > len(body) {
			t.Fatalf("%d results from %d bytes", len(rs), len(body))
		}
		canon := api.EncodeResults(nil, rs)
		again, err := api.DecodeResults(canon)
		if err != nil {
			t.Fatalf("re-encoded batch refused: %v", err)
		}
		if len(rs) > 0 && !reflect.DeepEqual(again, rs) {
			t.Fatalf("re-encoded batch decodes to\n%+v\nnot\n%+v", again, rs)
		}
		if !bytes.Equal(api.EncodeResults(nil, again), canon) {
			t.Fatal("two encodings of one batch")
		}
	})
}
