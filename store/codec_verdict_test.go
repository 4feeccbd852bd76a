package store

import (
	"bytes"
	"reflect"
	"testing"
)

func sampleVerdict() Verdict {
	return Verdict{HasGood: true, Good: Landmarks{TextLen: 4321, Title: true, H1: true, Canonical: true},
		GoodDigest: 0xfedcba9876543210, Reasons: 1<<0 | 1<<3, AtMs: 1_700_000_200_000,
		Agree: Agreement{Digest: 0x1122334455667788, Count: 2, FirstMs: 1_700_000_100_000, LastMs: 1_700_000_200_000}}
}

// A target with verdict state round-trips through version 3, with or without freshness state;
// one without it is written as version 1 or 2, byte for byte what a reader of before the
// verdicts wrote and reads.
func TestCodecTargetVerdict(t *testing.T) {
	for _, c := range []struct {
		name  string
		fresh Freshness
	}{{"without freshness", Freshness{}}, {"with freshness", sampleFreshness()}} {
		t.Run(c.name, func(t *testing.T) {
			tg := sampleTarget()
			tg.Fresh, tg.Verdict = c.fresh, sampleVerdict()
			b, err := tg.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if b[0] != tagTargetV3 {
				t.Fatalf("tag 0x%02x, want 0x%02x", b[0], tagTargetV3)
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
			if err := new(Target).UnmarshalBinary(append(append([]byte(nil), b...), 0)); !IsCorruptionError(err) {
				t.Fatalf("trailing byte: %v", err)
			}
			// Without the verdict, the same target is version 1 or 2 and the rest of its bytes
			// are unchanged.
			tg.Verdict = Verdict{}
			old, err := tg.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			want := byte(tagTargetV1)
			if !c.fresh.IsZero() {
				want = tagTargetV2
			}
			if old[0] != want || !bytes.Equal(old[1:targetFixedLen], b[1:targetFixedLen]) {
				t.Fatalf("a target without verdict state: tag 0x%02x (want 0x%02x), fixed part %x vs %x", old[0], want, old[:targetFixedLen], b[:targetFixedLen])
			}
			got = Target{Verdict: sampleVerdict()}
			if err := got.UnmarshalBinary(old); err != nil || !got.Verdict.IsZero() || got.Fresh != c.fresh {
				t.Fatalf("version %x decodes to verdict %+v fresh %+v, %v; want no verdict state", want, got.Verdict, got.Fresh, err)
			}
		})
	}
}

// Version 3 is canonical: every value has one encoding, and anything an encoder would not
// write is corruption (and refused to the encoder as an invalid target).
func TestCodecTargetVerdictRejects(t *testing.T) {
	base := sampleTarget()
	base.Verdict = Verdict{Marked: true}
	b, err := base.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != targetFixedLen+len(base.URL)+len(base.Device)+len(base.Route)+len(base.Failures.LastClass)+4+1+verdictLen {
		t.Fatalf("version 3 without freshness is %d bytes", len(b))
	}
	sec := len(b) - verdictLen // the verdict section's offset
	mutate := func(name string, f func(b []byte)) {
		t.Helper()
		bad := append([]byte(nil), b...)
		f(bad)
		if err := new(Target).UnmarshalBinary(bad); !IsCorruptionError(err) {
			t.Errorf("%s: %v, want corruption", name, err)
		}
	}
	mutate("empty section", func(b []byte) { b[sec] = 0 })
	mutate("unknown flag", func(b []byte) { b[sec] |= 0x40 })
	mutate("landmarks without a good render", func(b []byte) { b[sec] |= verdictTitle })
	mutate("good text length without a good render", func(b []byte) { b[sec+4] = 1 })
	mutate("good digest without a good render", func(b []byte) { b[sec+12] = 1 })
	mutate("negative verdict time", func(b []byte) { b[sec+17] = 0x80 })
	mutate("agreement of no renders", func(b []byte) { b[sec+32] = 1 })
	mutate("freshness presence byte 2", func(b []byte) { b[sec-1] = 2 })
	mutate("freshness said present, none follows", func(b []byte) { b[sec-1] = 1 })

	for name, v := range map[string]Verdict{
		"landmarks without a good render":   {Good: Landmarks{H1: true}},
		"digest without a good render":      {GoodDigest: 1},
		"negative time":                     {AtMs: -1},
		"agreement ending before it starts": {Agree: Agreement{Count: 1, FirstMs: 5, LastMs: 4}},
		"agreement of no renders":           {Agree: Agreement{Digest: 1}},
	} {
		tg := sampleTarget()
		tg.Verdict = v
		if _, err := tg.MarshalBinary(); !isErr(err, ErrInvalidTarget) {
			t.Errorf("encode %s: %v", name, err)
		}
	}
}
