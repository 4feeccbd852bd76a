package store

import (
	"math"
	"reflect"
	"testing"
)

func sampleFreshness() Freshness {
	return Freshness{
		Changed: 3, ChangedHours: 2.5, UnchangedHours: 40.25,
		Requests: 17.5, RequestsAtMs: 1_700_000_000_000,
		Digest: 0x0123456789abcdef, DigestAtMs: 1_700_000_100_000, Served: 12,
		ETag: `W/"abc"`, LastModified: "Wed, 21 Oct 2015 07:28:00 GMT", Conditional: 4,
	}
}

// A target with freshness state round-trips through version 2; one without it is written as
// version 1, byte for byte what a reader of before the freshness state wrote and reads.
func TestCodecTargetFreshness(t *testing.T) {
	tg := sampleTarget()
	tg.Fresh = sampleFreshness()
	b, err := tg.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != tagTargetV2 {
		t.Fatalf("tag 0x%02x, want 0x%02x", b[0], tagTargetV2)
	}
	var got Target
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tg) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, tg)
	}
	for n := range len(b) {
		if err := new(Target).UnmarshalBinary(b[:n]); !IsCorruptionError(err) {
			t.Fatalf("prefix of %d bytes: %v", n, err)
		}
	}

	old := sampleTarget()
	ob, err := old.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if ob[0] != tagTargetV1 || len(ob) != targetFixedLen+len(old.URL)+len(old.Device)+len(old.Route)+len(old.Failures.LastClass)+4 {
		t.Fatalf("a target without freshness state is not version 1: %x", ob)
	}
	got = Target{Fresh: sampleFreshness()}
	if err := got.UnmarshalBinary(ob); err != nil || got.Fresh != (Freshness{}) {
		t.Fatalf("version 1 decodes to %+v, %v; want no freshness state", got.Fresh, err)
	}
}

// Version 2 is canonical: an empty freshness section is version 1's to write, and a float
// that no encoder writes (NaN, ±Inf, negative, −0) is corruption.
func TestCodecTargetFreshnessRejects(t *testing.T) {
	tg := sampleTarget()
	tg.Fresh = Freshness{Conditional: 1}
	b, err := tg.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// Clear the only non-zero freshness field: an empty section under tag 2.
	empty := append([]byte(nil), b...)
	empty[len(empty)-3] = 0 // conditional's low byte, before two empty strings
	if err := new(Target).UnmarshalBinary(empty); !IsCorruptionError(err) {
		t.Fatalf("empty version-2 section: %v", err)
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, math.Copysign(0, -1)} {
		tg := sampleTarget()
		tg.Fresh = sampleFreshness()
		tg.Fresh.UnchangedHours = v
		if _, err := tg.MarshalBinary(); !isErr(err, ErrInvalidTarget) {
			t.Fatalf("encode unchanged hours %v: %v", v, err)
		}
		tg.Fresh.UnchangedHours = 1
		b, _ := tg.MarshalBinary()
		i := freshnessOffset(b) + 16
		putF64(b[i:], v)
		if err := new(Target).UnmarshalBinary(b); !IsCorruptionError(err) {
			t.Fatalf("decode unchanged hours %v: %v", v, err)
		}
	}
	tg = sampleTarget()
	tg.Fresh = sampleFreshness()
	tg.Fresh.ETag = string(make([]byte, maxShortLen+1))
	if _, err := tg.MarshalBinary(); !isErr(err, ErrInvalidTarget) {
		t.Fatalf("long etag: %v", err)
	}
}

// freshnessOffset is where the freshness section of b, a target with sampleFreshness's
// strings, starts.
func freshnessOffset(b []byte) int {
	f := sampleFreshness()
	return len(b) - freshnessFixedLen - 2 - len(f.ETag) - len(f.LastModified)
}

func putF64(b []byte, v float64) {
	u := math.Float64bits(v)
	for i := range 8 {
		b[i] = byte(u >> (56 - 8*i))
	}
}
