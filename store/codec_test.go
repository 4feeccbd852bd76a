package store

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"testing"
)

func sampleTarget() Target {
	return Target{
		URL: "https://example.com/a?b=c", Device: "mobile", Source: SourceDiscovered,
		StoredIntervalMs: 3_600_000, Route: "product", DemandRung: 2,
		Failures: Failures{Count: 3, LastClass: "timeout", FirstMs: 10, LastMs: 20},
		Terminal: TerminalSuppressed, TerminalRecheckMs: 99,
		LastRender: RenderSummary{Status: 200, AtMs: 1234, DurationMs: 800, Bytes: 4096},
	}
}

func samplePage() Page {
	return Page{Status: 200, RenderedAtMs: 1_700_000_000_000,
		Headers: []Header{{"Content-Type", "text/html"}, {"Vary", ""}},
		Body:    []byte("<html>hi</html>")}
}

// corruptible is every codec under one interface, for the shared rejection tests.
type corruptible interface {
	MarshalBinary() ([]byte, error)
}

func TestCodecRoundTrip(t *testing.T) {
	proj := Projection{Submitted: true, EffectiveIntervalMs: 7, StoredIntervalMs: math.MaxInt64,
		Checkable: true, Lanes: Lanes{Urgent: true, Failing: true}}
	ranked := proj
	ranked.RankIntervalMs = math.MaxInt64
	cases := []struct {
		name string
		in   corruptible
		out  interface{ UnmarshalBinary([]byte) error }
		size int
	}{
		{"projection", proj, &Projection{}, ProjectionV1Len},
		{"row", Row{DueAtMs: math.MaxInt64, Projection: proj}, &Row{}, RowV1Len},
		{"ranked projection", ranked, &Projection{}, ProjectionLen},
		{"ranked row", Row{DueAtMs: math.MaxInt64, Projection: ranked}, &Row{}, RowLen},
		{"ranked row, rank 1", Row{Projection: Projection{RankIntervalMs: 1}}, &Row{}, RowLen},
		{"target", sampleTarget(), &Target{}, -1},
		{"page", samplePage(), &Page{}, -1},
		{"empty page", Page{}, &Page{}, -1},
		{"page with its plain length (v2)", Page{Status: 200, Body: []byte("gz"), PlainLen: MaxPageBody,
			Headers: []Header{{Name: "content-encoding", Value: "gzip"}}}, &Page{}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := c.in.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if c.size >= 0 && len(b) != c.size {
				t.Fatalf("encoded %d bytes, want %d", len(b), c.size)
			}
			if err := c.out.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			got := reflect.ValueOf(c.out).Elem().Interface()
			if !reflect.DeepEqual(got, c.in) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, c.in)
			}
			// Every strict prefix is short: corruption, never a panic.
			for n := 0; n < len(b); n++ {
				if err := c.out.UnmarshalBinary(b[:n]); !IsCorruptionError(err) {
					t.Fatalf("prefix of %d bytes: err %v, want corruption", n, err)
				}
			}
			if err := c.out.UnmarshalBinary(append(append([]byte(nil), b...), 0)); !IsCorruptionError(err) {
				t.Fatalf("trailing byte: err %v, want corruption", err)
			}
			bad := append([]byte(nil), b...)
			bad[0] ^= 0x0f // another version of the same codec
			if err := c.out.UnmarshalBinary(bad); !IsCorruptionError(err) {
				t.Fatalf("unknown version: err %v, want corruption", err)
			}
		})
	}
}

func TestCodecRowEmbedsProjection(t *testing.T) {
	p := Projection{Submitted: true, EffectiveIntervalMs: 86_400_000, StoredIntervalMs: 3,
		Lanes: Lanes{NeverRendered: true}}
	for _, rank := range []int64{0, 5_000} {
		p.RankIntervalMs = rank
		pb, _ := p.MarshalBinary()
		rb, _ := Row{DueAtMs: 42, Projection: p}.MarshalBinary()
		if !bytes.Equal(rb[9:], pb[1:]) {
			t.Fatalf("rank %d: row body %x is not the projection body %x", rank, rb[9:], pb[1:])
		}
	}
}

// TestCodecProjectionGolden pins both versions' bytes. The version-1 ones are what every
// store held before the rank interval existed: a row without one must still encode to them,
// so a store under queue.policy ready is byte for byte unchanged.
func TestCodecProjectionGolden(t *testing.T) {
	p := Projection{Submitted: true, EffectiveIntervalMs: 0x0102030405060708, StoredIntervalMs: 0x1112131415161718,
		Lanes: Lanes{Urgent: true, NeverRendered: true, Failing: true}}
	r := Row{DueAtMs: 0x2122232425262728, Projection: p}
	const (
		projV1 = "11" + "0f" + "0102030405060708" + "1112131415161718"
		rowV1  = "21" + "2122232425262728" + "0f" + "0102030405060708" + "1112131415161718"
		projV2 = "12" + "0f" + "0102030405060708" + "1112131415161718" + "3132333435363738"
		rowV2  = "22" + "2122232425262728" + "0f" + "0102030405060708" + "1112131415161718" + "3132333435363738"
	)
	pr, rr := p, r
	pr.RankIntervalMs, rr.RankIntervalMs = 0x3132333435363738, 0x3132333435363738
	// Checkable is bit 4 of the same flags byte, in either version.
	const (
		projV1Checkable = "11" + "1f" + "0102030405060708" + "1112131415161718"
		rowV2Checkable  = "22" + "2122232425262728" + "1f" + "0102030405060708" + "1112131415161718" + "3132333435363738"
	)
	pc, rc := p, rr
	pc.Checkable, rc.Checkable = true, true
	for _, c := range []struct {
		name string
		in   corruptible
		out  interface{ UnmarshalBinary([]byte) error }
		hex  string
	}{
		{"projection v1", p, &Projection{}, projV1},
		{"row v1", r, &Row{}, rowV1},
		{"projection v2", pr, &Projection{}, projV2},
		{"row v2", rr, &Row{}, rowV2},
		{"projection v1, checkable", pc, &Projection{}, projV1Checkable},
		{"row v2, checkable", rc, &Row{}, rowV2Checkable},
	} {
		b, err := c.in.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != c.hex {
			t.Fatalf("%s: encoded %s, want %s", c.name, got, c.hex)
		}
		want, _ := hex.DecodeString(c.hex)
		if err := c.out.UnmarshalBinary(want); err != nil {
			t.Fatalf("%s: decode: %v", c.name, err)
		}
		if got := reflect.ValueOf(c.out).Elem().Interface(); !reflect.DeepEqual(got, c.in) {
			t.Fatalf("%s: decoded %+v, want %+v", c.name, got, c.in)
		}
	}
}

// TestCodecRankedRefusals: every way a value can carry the rank interval wrongly is
// corruption, on the projection's fast path and on the row.
func TestCodecRankedRefusals(t *testing.T) {
	p := Projection{EffectiveIntervalMs: 1, StoredIntervalMs: 2, RankIntervalMs: 3}
	pv2, _ := p.MarshalBinary()
	rv2, _ := Row{DueAtMs: 4, Projection: p}.MarshalBinary()
	pv1, _ := Projection{EffectiveIntervalMs: 1}.MarshalBinary()
	rv1, _ := Row{DueAtMs: 4}.MarshalBinary()
	edit := func(b []byte, f func([]byte)) []byte {
		c := append([]byte(nil), b...)
		f(c)
		return c
	}
	zeroRank := func(off int) func([]byte) {
		return func(b []byte) { clear(b[off : off+8]) }
	}
	for _, c := range []struct {
		name string
		out  interface{ UnmarshalBinary([]byte) error }
		in   []byte
	}{
		{"projection v2, rank 0", &Projection{}, edit(pv2, zeroRank(18))},
		{"projection v2, rank negative", &Projection{}, edit(pv2, func(b []byte) { b[18] = 0x80 })},
		{"projection v2, effective negative", &Projection{}, edit(pv2, func(b []byte) { b[2] = 0x80 })},
		{"projection v2, stored negative", &Projection{}, edit(pv2, func(b []byte) { b[10] = 0x80 })},
		{"projection v2, unknown flag", &Projection{}, edit(pv2, func(b []byte) { b[1] = 0x20 })},
		{"projection v2 tag at v1 length", &Projection{}, edit(pv1, func(b []byte) { b[0] = tagProjectionV2 })},
		{"projection v1 tag at v2 length", &Projection{}, edit(pv2, func(b []byte) { b[0] = tagProjectionV1 })},
		{"projection between the lengths", &Projection{}, pv2[:ProjectionV1Len+1]},
		{"row v2, rank 0", &Row{}, edit(rv2, zeroRank(26))},
		{"row v2, rank negative", &Row{}, edit(rv2, func(b []byte) { b[26] = 0x80 })},
		{"row v2, due negative", &Row{}, edit(rv2, func(b []byte) { b[1] = 0x80 })},
		{"row v2 tag at v1 length", &Row{}, edit(rv1, func(b []byte) { b[0] = tagRowV2 })},
		{"row v1 tag at v2 length", &Row{}, edit(rv2, func(b []byte) { b[0] = tagRowV1 })},
		{"row as projection", &Projection{}, rv1},
		{"ranked projection as row", &Row{}, append(append([]byte(nil), pv2...), make([]byte, RowLen-ProjectionLen)...)},
	} {
		if err := c.out.UnmarshalBinary(c.in); !IsCorruptionError(err) {
			t.Errorf("%s (%x): err %v, want corruption", c.name, c.in, err)
		}
	}
}

func TestCodecRejectsOutOfRange(t *testing.T) {
	p := Projection{EffectiveIntervalMs: 1}
	b, _ := p.MarshalBinary()
	b[1] = 0x20 // an unknown flag
	if err := new(Projection).UnmarshalBinary(b); !IsCorruptionError(err) {
		t.Fatalf("unknown flag: %v", err)
	}
	b, _ = p.MarshalBinary()
	b[2] = 0x80 // effective interval negative
	if err := new(Projection).UnmarshalBinary(b); !IsCorruptionError(err) {
		t.Fatalf("negative interval: %v", err)
	}
	r, _ := Row{DueAtMs: 5}.MarshalBinary()
	r[1] = 0x80 // negative due
	if err := new(Row).UnmarshalBinary(r); !IsCorruptionError(err) {
		t.Fatalf("negative due: %v", err)
	}
	// A projection is not a row, a row is not a target.
	pb, _ := Projection{}.MarshalBinary()
	if err := new(Target).UnmarshalBinary(pb); !IsCorruptionError(err) {
		t.Fatalf("projection as target: %v", err)
	}
	tb, _ := sampleTarget().MarshalBinary()
	tb[1] = 9 // unknown source
	if err := new(Target).UnmarshalBinary(tb); !IsCorruptionError(err) {
		t.Fatalf("unknown source: %v", err)
	}
	tb, _ = sampleTarget().MarshalBinary()
	tb[2] = 7 // unknown terminal state
	if err := new(Target).UnmarshalBinary(tb); !IsCorruptionError(err) {
		t.Fatalf("unknown terminal: %v", err)
	}
	// A length prefix claiming more than the value holds.
	pg := []byte{tagPageV1, 0, 200, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}
	if err := new(Page).UnmarshalBinary(pg); !IsCorruptionError(err) {
		t.Fatalf("huge body length: %v", err)
	}
	// Too many headers.
	// Version 2 with a plain length of 0 (version 1's to write) or above MaxPageBody.
	for _, plain := range [][4]byte{{}, {0x02, 0, 0, 1}} {
		v2 := append([]byte{tagPageV2, 0, 200, 0, 0, 0, 0, 0, 0, 0, 0, 0}, plain[:]...)
		if err := new(Page).UnmarshalBinary(append(v2, 0)); !IsCorruptionError(err) {
			t.Fatalf("page v2 with plain length %x: %v", plain, err)
		}
	}
	pg = []byte{tagPageV1, 0, 200, 0, 0, 0, 0, 0, 0, 0, 0, MaxPageHeaders + 1}
	if err := new(Page).UnmarshalBinary(pg); !IsCorruptionError(err) {
		t.Fatalf("too many headers: %v", err)
	}
}

func TestCodecEncodeValidates(t *testing.T) {
	if _, err := (Projection{EffectiveIntervalMs: -1}).MarshalBinary(); !isErr(err, ErrNegativeInterval) {
		t.Fatalf("negative interval: %v", err)
	}
	if _, err := (Row{DueAtMs: -1}).MarshalBinary(); !isErr(err, ErrNegativeDue) {
		t.Fatalf("negative due: %v", err)
	}
	if _, err := (Projection{RankIntervalMs: -1}).MarshalBinary(); !isErr(err, ErrNegativeInterval) {
		t.Fatalf("negative rank interval: %v", err)
	}
	if _, err := (Row{Projection: Projection{RankIntervalMs: -1}}).MarshalBinary(); !isErr(err, ErrNegativeInterval) {
		t.Fatalf("row with a negative rank interval: %v", err)
	}
	if _, err := ProjectionOf(0, 0, 0, -1); !IsCorruptionError(err) {
		t.Fatalf("ProjectionOf with a negative rank interval: %v", err)
	}
	if p, err := ProjectionOf(flagUrgent, 1, 2, 3); err != nil || p != (Projection{EffectiveIntervalMs: 1,
		StoredIntervalMs: 2, RankIntervalMs: 3, Lanes: Lanes{Urgent: true}}) {
		t.Fatalf("ProjectionOf: %+v, %v", p, err)
	}
	if p, err := ProjectionOf(flagCheckable, 0, 0, 0); err != nil || p != (Projection{Checkable: true}) || p.Flags() != flagCheckable {
		t.Fatalf("ProjectionOf checkable: %+v, %v", p, err)
	}
	if _, err := ProjectionOf(1<<5, 0, 0, 0); !IsCorruptionError(err) {
		t.Fatalf("ProjectionOf with an unknown flag: %v", err)
	}
	tg := sampleTarget()
	tg.Source = 0
	if _, err := tg.MarshalBinary(); !isErr(err, ErrInvalidTarget) {
		t.Fatalf("no source: %v", err)
	}
	pg := samplePage()
	pg.Headers = append(pg.Headers, Header{Name: ""})
	if _, err := pg.MarshalBinary(); !isErr(err, ErrInvalidPage) {
		t.Fatalf("empty header name: %v", err)
	}
	pg = Page{Body: make([]byte, MaxPageBody+1)}
	if _, err := pg.MarshalBinary(); !isErr(err, ErrInvalidPage) {
		t.Fatalf("huge body: %v", err)
	}
}

func TestEnumStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{SourceSitemap.String(), "sitemap"}, {SourceDiscovered.String(), "discovered"},
		{SourceAPI.String(), "api"}, {Source(9).String(), "source(9)"},
		{TerminalNone.String(), "none"}, {TerminalGone.String(), "gone"},
		{TerminalSuppressed.String(), "suppressed"}, {TerminalBeyondHorizon.String(), "beyond_horizon"},
		{Terminal(9).String(), "terminal(9)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// BenchmarkProjectionUnmarshal is the sweep's per-row decode, of each version.
func BenchmarkProjectionUnmarshal(b *testing.B) {
	for _, c := range []struct {
		name string
		p    Projection
	}{
		{"v1", Projection{Submitted: true, EffectiveIntervalMs: 3_600_000, StoredIntervalMs: 86_400_000}},
		{"v2", Projection{Submitted: true, EffectiveIntervalMs: 3_600_000, StoredIntervalMs: 86_400_000, RankIntervalMs: 900_000}},
	} {
		enc, err := c.p.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			var p Projection
			for b.Loop() {
				if err := p.UnmarshalBinary(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
