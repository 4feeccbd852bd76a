package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/freshq/freshq/outcome"
)

func sampleResults() []Result {
	return []Result{
		{Key: []byte("desktop|https://a.test/c/1"), Outcome: "ok", Status: 200, Stage: "body", DurationMs: 1234,
			Headers: map[string]string{"content-type": "text/html", "etag": `"x"`, "cache-control": "max-age=60"},
			Body:    []byte("<html>1</html>"), Lease: Lease{Slot: 4095, State: 1<<63 | 12345, KeyHash: 0xdeadbeefcafef00d},
			Signals: &Signals{Exceptions: 2, FailedRequests: 1, PendingRequests: 3, Cold: true, Evidence: []string{"TypeError: x is undefined", "GET https://a.test/api/1: 500"}}},
		{Key: []byte("desktop|https://a.test/c/2"), Outcome: "ok", Status: 200, Stage: "body", Body: []byte("<html>2</html>"),
			Signals: &Signals{}}, // a browser that saw nothing wrong: signals, all zero
		{Key: []byte("mobile|https://a.test/"), Outcome: "server_error", Status: 503, Stage: "headers", DurationMs: -1,
			Err: "upstream said no", Lease: Lease{Slot: 0, State: 0, KeyHash: 1}},
		{Key: []byte("k"), Outcome: "a future outcome"},
	}
}

// A binary batch decodes to exactly the results that were encoded, field for field; no result
// and an empty batch are both valid.
func TestResultsBatchRoundTrips(t *testing.T) {
	for _, rs := range [][]Result{sampleResults(), nil} {
		b := EncodeResults(nil, rs)
		got, err := DecodeResults(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 && len(got) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, rs) {
			t.Fatalf("decoded\n%+v\nwant\n%+v", got, rs)
		}
		if again := EncodeResults(nil, got); !bytes.Equal(again, b) {
			t.Fatal("re-encoding a decoded batch changed its bytes")
		}
	}
	// EncodeResults appends.
	if b := EncodeResults([]byte("xy"), nil); string(b[:2]) != "xy" || string(b[2:5]) != resultsMagic {
		t.Fatalf("EncodeResults did not append: %q", b)
	}
}

// Every proper prefix of a batch, as a dropped connection leaves it, and a batch with bytes
// after its last result are corrupt; another magic or another version is refused as such.
func TestResultsBatchRefusesWhatItCannotRead(t *testing.T) {
	b := EncodeResults(nil, sampleResults())
	for n := range len(b) {
		_, err := DecodeResults(b[:n])
		if n < len(resultsMagic)+1 {
			if !errors.Is(err, ErrResultsMagic) {
				t.Fatalf("%d-byte prefix: %v, want ErrResultsMagic", n, err)
			}
			continue
		}
		if !errors.Is(err, ErrResultsCorrupt) {
			t.Fatalf("%d-byte prefix of %d: %v, want ErrResultsCorrupt", n, len(b), err)
		}
	}
	if _, err := DecodeResults(append(b[:len(b):len(b)], 0)); !errors.Is(err, ErrResultsCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
	v2 := bytes.Clone(b)
	v2[len(resultsMagic)] = ResultsVersion + 1
	if _, err := DecodeResults(v2); !errors.Is(err, ErrResultsVersion) {
		t.Fatalf("version %d: %v", ResultsVersion+1, err)
	}
	if _, err := DecodeResults([]byte(`{"results": []}`)); !errors.Is(err, ErrResultsMagic) {
		t.Fatalf("JSON: %v", err)
	}
	// A count the body cannot hold is refused before anything is allocated for it.
	huge := append([]byte(resultsMagic), ResultsVersion, 0xff, 0xff, 0xff, 0xff, 0x0f)
	if _, err := DecodeResults(huge); !errors.Is(err, ErrResultsCorrupt) {
		t.Fatalf("huge count: %v", err)
	}
	// Header names must be distinct and ascending, so that one batch has one encoding.
	dup := append([]byte(resultsMagic), ResultsVersion, 1, 1, 'k', 2, 'o', 'k', 0, 0, 0,
		2, 1, 'a', 0, 1, 'a', 0, 0, 0, 0)
	dup = append(dup, make([]byte, 16+1)...) // the lease words, no signals
	if _, err := DecodeResults(dup); !errors.Is(err, ErrResultsCorrupt) || !strings.Contains(err.Error(), "ascending") {
		t.Fatalf("duplicate header: %v", err)
	}
	dup[bytes.LastIndexByte(dup, 'a')] = 'b'
	if rs, err := DecodeResults(dup); err != nil || len(rs[0].Headers) != 2 {
		t.Fatalf("distinct headers: %+v %v", rs, err)
	}
}

// Decoding a batch of render's own outcomes and stages allocates nothing per string; keys and
// bodies are slices of the batch.
func TestResultsBatchDecodesWithoutCopying(t *testing.T) {
	b := EncodeResults(nil, []Result{{Key: []byte("desktop|https://a.test/"), Outcome: "ok", Stage: "body", Body: []byte("<html/>")}})
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := DecodeResults(b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("%v allocations to decode one result, want 1 (the slice of results)", allocs)
	}
	for _, stage := range outcome.Stages() {
		sb := EncodeResults(nil, []Result{{Key: []byte("desktop|https://a.test/"), Outcome: "ok", Stage: stage}})
		if allocs := testing.AllocsPerRun(10, func() { DecodeResults(sb) }); allocs > 1 {
			t.Errorf("stage %q: %v allocations to decode, want 1: it is not interned", stage, allocs)
		}
	}
	rs, _ := DecodeResults(b)
	if &rs[0].Body[0] != &b[len(b)-1-16-1-1-len("<html/>")] { // signals byte, lease words, slot, err
		t.Fatal("the body was copied")
	}
}

// BenchmarkResultsBatch decodes and encodes a batch of 256 results shaped like the sim
// renderer's (a ~60-byte key, two headers, a 2 KiB body) in both forms, side by side.
func BenchmarkResultsBatch(b *testing.B) {
	rs := make([]Result, 256)
	body := bytes.Repeat([]byte("<p>freshq</p>"), 2048/13)
	for i := range rs {
		rs[i] = Result{Key: fmt.Appendf(nil, "desktop|https://shop.example.test/p/product-%07d-detail", i),
			Outcome: "ok", Status: 200, Stage: "body", DurationMs: 6000,
			Headers: map[string]string{"content-type": "text/html", "etag": `"v1"`}, Body: body,
			Lease: Lease{Slot: uint32(i), State: 1<<40 | uint64(i), KeyHash: uint64(i) * 0x9e3779b97f4a7c15}}
	}
	bin := EncodeResults(nil, rs)
	js, err := json.Marshal(ResultsRequest{Results: rs})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode/binary", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeResults(bin); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/json", func(b *testing.B) {
		for b.Loop() {
			var req ResultsRequest
			if err := json.Unmarshal(js, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/binary", func(b *testing.B) {
		buf := make([]byte, 0, len(bin))
		for b.Loop() {
			buf = EncodeResults(buf[:0], rs)
		}
	})
	b.Run("encode/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(ResultsRequest{Results: rs}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A body that declares more than MaxResults results is refused before the results are
// allocated: DecodeResults itself enforces the count.
func TestDecodeResultsEnforcesMaxResults(t *testing.T) {
	rs := make([]Result, MaxResults+1)
	for i := range rs {
		rs[i] = Result{Key: []byte("k"), Outcome: "ok", Status: 200}
	}
	_, err := DecodeResults(EncodeResults(nil, rs))
	if !errors.Is(err, ErrResultsCorrupt) || FieldOf(err) != "results" {
		t.Fatalf("%d results: %v (field %q), want ErrResultsCorrupt naming results", len(rs), err, FieldOf(err))
	}
	if _, err := DecodeResults(EncodeResults(nil, rs[:MaxResults])); err != nil {
		t.Fatalf("%d results: %v", MaxResults, err)
	}
}

// A result's signals are bounded as a render worker trims them, and every byte of their
// section has one meaning: a decoder refuses more evidence, longer evidence, and presence or
// cold bytes other than 0 and 1.
func TestResultsBatchRefusesSignalsOutOfBounds(t *testing.T) {
	encode := func(sg *Signals) []byte {
		return EncodeResults(nil, []Result{{Key: []byte("k"), Outcome: "ok", Signals: sg}})
	}
	within := &Signals{Exceptions: 1, Evidence: []string{strings.Repeat("e", MaxSignalEvidenceLen), "", "x", "y"}}
	if rs, err := DecodeResults(encode(within)); err != nil || !reflect.DeepEqual(rs[0].Signals, within) {
		t.Fatalf("signals at their bounds: %+v, %v", rs, err)
	}
	for name, sg := range map[string]*Signals{
		"five lines of evidence": {Evidence: []string{"a", "b", "c", "d", "e"}},
		"a line too long":        {Evidence: []string{strings.Repeat("e", MaxSignalEvidenceLen+1)}},
	} {
		if _, err := DecodeResults(encode(sg)); !errors.Is(err, ErrResultsCorrupt) {
			t.Errorf("%s: %v, want ErrResultsCorrupt", name, err)
		}
	}
	none := encode(nil)
	none[len(none)-1] = 2 // the presence byte
	if _, err := DecodeResults(none); !errors.Is(err, ErrResultsCorrupt) {
		t.Errorf("presence byte 2: %v", err)
	}
	cold := encode(&Signals{Cold: true})
	cold[len(cold)-2] = 2 // the cold byte, before the evidence count
	if _, err := DecodeResults(cold); !errors.Is(err, ErrResultsCorrupt) {
		t.Errorf("cold byte 2: %v", err)
	}
}
