package store

import (
	"bytes"
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
		Lanes: Lanes{Urgent: true, Failing: true}}
	cases := []struct {
		name string
		in   corruptible
		out  interface{ UnmarshalBinary([]byte) error }
		size int
	}{
		{"projection", proj, &Projection{}, ProjectionLen},
		{"row", Row{DueAtMs: math.MaxInt64, Projection: proj}, &Row{}, RowLen},
		{"target", sampleTarget(), &Target{}, -1},
		{"page", samplePage(), &Page{}, -1},
		{"empty page", Page{}, &Page{}, -1},
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
	pb, _ := p.MarshalBinary()
	rb, _ := Row{DueAtMs: 42, Projection: p}.MarshalBinary()
	if !bytes.Equal(rb[9:], pb[1:]) {
		t.Fatalf("row body %x is not the projection body %x", rb[9:], pb[1:])
	}
}

func TestCodecRejectsOutOfRange(t *testing.T) {
	p := Projection{EffectiveIntervalMs: 1}
	b, _ := p.MarshalBinary()
	b[1] = 0x10 // an unknown flag
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
