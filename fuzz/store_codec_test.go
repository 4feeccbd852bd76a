package fuzz

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
)

// Every store decoder is fuzzed here. The property is the same for each: any input either
// decodes, or fails with an error wrapping store.ErrCorruption — never a panic, never another
// error — and whatever decodes re-encodes to exactly the input (the codecs are canonical, so a
// value that decodes is one the encoder could have written).
//
// Seeds follow the NATS habit: well-formed encodings, then every truncation of them (what a
// torn write would leave), then a half-written value padded with zeros.

// seedTruncations adds b, each of its strict prefixes, and b's first half zero-padded to full
// length.
func seedTruncations(f *testing.F, b []byte) {
	f.Add(b)
	for n := range len(b) {
		f.Add(b[:n])
	}
	half := make([]byte, len(b))
	copy(half, b[:len(b)/2])
	f.Add(half)
}

func mustMarshal(f *testing.F, v interface{ MarshalBinary() ([]byte, error) }) []byte {
	b, err := v.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// checkDecode asserts the shared property for one decoder.
func checkDecode(t *testing.T, in []byte, err error, reencode func() ([]byte, error)) {
	if err != nil {
		if !store.IsCorruptionError(err) {
			t.Fatalf("decode %x: error %v does not wrap ErrCorruption", in, err)
		}
		return
	}
	out, err := reencode()
	if err != nil {
		t.Fatalf("decoded %x but cannot re-encode: %v", in, err)
	}
	if !bytes.Equal(out, in) {
		t.Fatalf("not canonical: decoded %x, re-encoded %x", in, out)
	}
}

func FuzzStoreProjection(f *testing.F) {
	seedTruncations(f, mustMarshal(f, store.Projection{Submitted: true, EffectiveIntervalMs: 3_600_000,
		StoredIntervalMs: 86_400_000, Lanes: store.Lanes{Urgent: true, Failing: true}}))
	seedTruncations(f, mustMarshal(f, store.Projection{}))
	// Version 2: a rank interval, and one at the largest value the decoder takes.
	seedTruncations(f, mustMarshal(f, store.Projection{Submitted: true, EffectiveIntervalMs: 3_600_000,
		StoredIntervalMs: 86_400_000, RankIntervalMs: 900_000, Lanes: store.Lanes{NeverRendered: true}}))
	seedTruncations(f, mustMarshal(f, store.Projection{RankIntervalMs: math.MaxInt64}))
	// The checkable flag (bit 4), in either version.
	seedTruncations(f, mustMarshal(f, store.Projection{Checkable: true, Lanes: store.Lanes{Failing: true}}))
	seedTruncations(f, mustMarshal(f, store.Projection{Checkable: true, RankIntervalMs: 60_000}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p store.Projection
		err := p.UnmarshalBinary(b)
		checkDecode(t, b, err, p.MarshalBinary)
	})
}

func FuzzStoreRow(f *testing.F) {
	seedTruncations(f, mustMarshal(f, store.Row{DueAtMs: 1_700_000_000_000, Projection: store.Projection{
		EffectiveIntervalMs: 60_000, Lanes: store.Lanes{NeverRendered: true}}}))
	seedTruncations(f, mustMarshal(f, store.Row{DueAtMs: math.MaxInt64}))
	// Version 2: a rank interval, and one at the largest value the decoder takes.
	seedTruncations(f, mustMarshal(f, store.Row{DueAtMs: 1_700_000_000_000, Projection: store.Projection{
		EffectiveIntervalMs: 60_000, StoredIntervalMs: 3_600_000, RankIntervalMs: 120_000,
		Lanes: store.Lanes{Urgent: true}}}))
	seedTruncations(f, mustMarshal(f, store.Row{DueAtMs: math.MaxInt64, Projection: store.Projection{
		RankIntervalMs: math.MaxInt64}}))
	seedTruncations(f, mustMarshal(f, store.Row{DueAtMs: 1, Projection: store.Projection{Checkable: true}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r store.Row
		err := r.UnmarshalBinary(b)
		checkDecode(t, b, err, r.MarshalBinary)
	})
}

func FuzzStoreTarget(f *testing.F) {
	seedTruncations(f, mustMarshal(f, store.Target{
		URL: "https://shop.example/p/1?c=2", Device: "desktop", Source: store.SourceSitemap,
		StoredIntervalMs: 21_600_000, Route: "product", DemandRung: 1,
		Failures: store.Failures{Count: 2, LastClass: "timeout", FirstMs: 1, LastMs: 2},
		Terminal: store.TerminalGone, TerminalRecheckMs: 1_209_600_000,
		LastRender: store.RenderSummary{Status: 404, AtMs: 5, DurationMs: 900, Bytes: 12_345},
	}))
	seedTruncations(f, mustMarshal(f, store.Target{Source: store.SourceDiscovered}))
	seedTruncations(f, mustMarshal(f, store.Target{URL: "https://shop.example/", Source: store.SourceAPI,
		Fresh: store.Freshness{Changed: 1, ChangedHours: 0.5, UnchangedHours: 12, Requests: 3, RequestsAtMs: 9,
			Digest: 42, DigestAtMs: 8, Conditional: 2, ETag: `"e"`, LastModified: "Tue, 01 Dec 2026 10:00:00 GMT"}}))
	// Version 3: the verdict section, without and with the freshness section.
	seedTruncations(f, mustMarshal(f, store.Target{URL: "https://shop.example/v", Source: store.SourceSitemap,
		Verdict: store.Verdict{Marked: true, Reasons: 1, AtMs: 7}}))
	seedTruncations(f, mustMarshal(f, store.Target{URL: "https://shop.example/w", Source: store.SourceAPI,
		Fresh: store.Freshness{Digest: 42, DigestAtMs: 8},
		Verdict: store.Verdict{HasGood: true, Good: store.Landmarks{TextLen: 900, Title: true, H1: true, Description: true, Canonical: true},
			GoodDigest: 42, Reasons: 0x10, AtMs: 9, Agree: store.Agreement{Digest: 43, Count: 2, FirstMs: 3, LastMs: 9}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var v store.Target
		err := v.UnmarshalBinary(b)
		checkDecode(t, b, err, v.MarshalBinary)
	})
}

func FuzzStorePage(f *testing.F) {
	seedTruncations(f, mustMarshal(f, store.Page{Status: 200, RenderedAtMs: 1_700_000_000_000,
		Headers: []store.Header{{Name: "Content-Type", Value: "text/html; charset=utf-8"}, {Name: "Link", Value: ""}},
		Body:    []byte("<!doctype html><title>x</title>")}))
	seedTruncations(f, mustMarshal(f, store.Page{}))
	seedTruncations(f, mustMarshal(f, store.Page{Status: 200, PlainLen: 4096, // page v2
		Headers: []store.Header{{Name: "content-encoding", Value: "gzip"}}, Body: []byte{0x1f, 0x8b}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p store.Page
		err := p.UnmarshalBinary(b)
		checkDecode(t, b, err, p.MarshalBinary)
		// The shared decoding is the same decoder: the same verdict and the same page, its
		// body b's own bytes.
		var shared store.Page
		serr := shared.UnmarshalShared(b)
		if (err == nil) != (serr == nil) {
			t.Fatalf("UnmarshalBinary: %v, UnmarshalShared: %v", err, serr)
		}
		if err == nil && !reflect.DeepEqual(p, shared) && !(len(p.Body) == 0 && len(shared.Body) == 0) {
			t.Fatalf("UnmarshalBinary %+v, UnmarshalShared %+v", p, shared)
		}
		if len(shared.Body) > 0 && &shared.Body[0] != &b[len(b)-len(shared.Body)] {
			t.Fatal("UnmarshalShared copied the body")
		}
	})
}

func FuzzStoreDueKey(f *testing.F) {
	k := append([]byte("d/"), 0, 0, 1, 0x8b, 0xcf, 0xe5, 0x68, 0x00)
	k = append(k, "desktop|https://shop.example/"...)
	seedTruncations(f, k)
	f.Add(append([]byte("d/"), 0xff, 0, 0, 0, 0, 0, 0, 0, 'k'))
	f.Fuzz(func(t *testing.T, b []byte) {
		due, key, err := badgerstore.DecodeDueKey(b)
		if err != nil {
			if !store.IsCorruptionError(err) {
				t.Fatalf("DecodeDueKey(%x): %v does not wrap ErrCorruption", b, err)
			}
			return
		}
		if due < 0 || len(key) == 0 || len(key) > store.MaxKeyLen {
			t.Fatalf("DecodeDueKey(%x) = %d, %d-byte key", b, due, len(key))
		}
		// Rebuilding the key from its parts gives the input back.
		s, err := store.NewSchedule(key, due, false, 0, store.Lanes{})
		if err != nil {
			t.Fatalf("decoded parts rejected by NewSchedule: %v", err)
		}
		if s.DueAtMs() != due || !reflect.DeepEqual(s.Key(), key) {
			t.Fatal("schedule does not carry the decoded parts")
		}
	})
}

func FuzzStoreClassKey(f *testing.F) {
	k := append([]byte("c/"), 0, 1, 0, 0x2a, 0, 0, 1, 0x8b, 0xcf, 0xe5, 0x68, 0x00)
	k = append(k, "desktop|https://shop.example/"...)
	seedTruncations(f, k)
	f.Add(append([]byte("c/"), 0, 0, 0, 0, 0xff, 0, 0, 0, 0, 0, 0, 0, 'k'))
	f.Add(append([]byte("d/"), make([]byte, 13)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		class, due, key, err := badgerstore.DecodeClassKey(b)
		if err != nil {
			if !store.IsCorruptionError(err) {
				t.Fatalf("DecodeClassKey(%x): %v does not wrap ErrCorruption", b, err)
			}
			return
		}
		if due < 0 || len(key) == 0 || len(key) > store.MaxKeyLen {
			t.Fatalf("DecodeClassKey(%x) = %d, %d-byte key", b, due, len(key))
		}
		// Encoding the parts again gives the input back: the order of the index is the order
		// of (class, due, key).
		again := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32([]byte("c/"), class), uint64(due))
		if again = append(again, key...); !bytes.Equal(again, b) {
			t.Fatalf("DecodeClassKey(%x) = (%d, %d, %q), which encodes as %x", b, class, due, key, again)
		}
	})
}
