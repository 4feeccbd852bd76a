package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// testdata/alias-bomb.yaml is ten levels of ten aliases each inside render.user_agents (563
// bytes standing for 10¹⁰ nodes); testdata/merge-chain.yaml is thirty anchors each merging the
// one before twice (about 1 KiB standing for 2³⁰). Decoded, the first took gigabytes and the
// second never finished. Both are refused before decoding, naming the alias that crossed
// MaxAliasNodes: its line and the key it sits under.
func TestAliasExpansionIsBounded(t *testing.T) {
	for _, tc := range []struct {
		file, path string
		line       int
	}{
		// a0 stands for 11 nodes, a1 for 111, a2 for 1,111: a1's ten aliases stand for 110,
		// a2's for 1,110, and the eighth of a3's (line 6) brings the sum past 10,000.
		{"testdata/alias-bomb.yaml", "render.user_agents.a3[7]", 6},
		// m0 stands for 3 nodes, m_i for 5 + 2·m_(i-1): m9 for 4,091. The aliases up to x9's
		// stand for 8,086; x10's first (line 11) brings the sum past 10,000.
		{"testdata/merge-chain.yaml", "x10.<<[0]", 11},
	} {
		data, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := Parse(data); done <- err }()
		select {
		case err = <-done:
		case <-time.After(time.Minute): // a hang is the failure; no pass waits for this
			t.Fatalf("%s: Parse did not return", tc.file)
		}
		var fe *FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) || !strings.Contains(fe.Msg, "aliases") {
			t.Fatalf("%s: %v; want a FieldError about aliases", tc.file, err)
		}
		if fe.Line != tc.line || fe.Path != tc.path {
			t.Fatalf("%s: refused at line %d, %s; want line %d, %s", tc.file, fe.Line, fe.Path, tc.line, tc.path)
		}
	}
}

// Aliases that stand for little still load, and exactly at the bound a file loads; one node
// past it is refused. An alias to an anchor not defined above it is refused with its line.
func TestAliasesWithinTheBoundLoad(t *testing.T) {
	c, err := Parse([]byte("render:\n  user_agents:\n    mobile: &ua \"Mozilla/5.0 (Linux; Android 14)\"\n    tablet: *ua\n"))
	if err != nil || c.Render.UserAgents["tablet"] != c.Render.UserAgents["mobile"] {
		t.Fatalf("a shared user agent: %v, %+v", err, c)
	}
	route := "routes:\n  - {<<: &r {match: prefix, interval: 6h}, name: a, path: /a/}\n  - {<<: *r, name: b, path: /b/}\n"
	if c, err := Parse([]byte(route)); err != nil || len(c.Routes) != 2 || c.Routes[1].Interval != c.Routes[0].Interval {
		t.Fatalf("a merged route: %v, %+v", err, c)
	}

	// An anchored sequence of n scalars stands for n+1 nodes; k aliases to it for k(n+1).
	atBound := func(extra int) []byte {
		var b strings.Builder
		b.WriteString("x: &s [")
		for i := range 99 {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprint(&b, i)
		}
		b.WriteString("]\ny: [")
		for i := range MaxAliasNodes / 100 {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*s")
		}
		for range extra {
			b.WriteString(", *t")
		}
		b.WriteString("]\n")
		if extra > 0 {
			return append([]byte("t: &t 1\n"), b.String()...)
		}
		return []byte(b.String())
	}
	// x and y are unknown keys: the strict decoder refuses them after the bound let them by.
	if _, err := Parse(atBound(0)); err == nil || strings.Contains(err.Error(), "aliases") {
		t.Fatalf("exactly at the bound: %v; want the unknown key refused, not the aliases", err)
	}
	var fe *FieldError
	if _, err := Parse(atBound(1)); !errors.As(err, &fe) || !strings.Contains(fe.Msg, "aliases") || fe.Line != 3 {
		t.Fatalf("one node past the bound: %v; want the aliases refused at line 3", err)
	}

	if _, err := Parse([]byte("render:\n  user_agents:\n    tablet: *ua\n    mobile: &ua x\n")); !errors.As(err, &fe) || fe.Line != 3 || !strings.Contains(fe.Msg, "no anchor") {
		t.Fatalf("an alias before its anchor: %v", err)
	}
}

// ParseContext gives up on a request that has ended.
func TestParseContextEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ParseContext(ctx, []byte("queue: {lease_ttl: 5m}\n")); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("after the request ended: %v", err)
	}
	if _, err := ParseContext(context.Background(), []byte("queue: {lease_ttl: 5m}\n")); err != nil {
		t.Fatal(err)
	}
}
