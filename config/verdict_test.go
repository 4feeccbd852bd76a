package config

import (
	"errors"
	"testing"
	"time"

	"github.com/freshq/freshq/verdict"
)

func TestVerdictDefaultsAndSettings(t *testing.T) {
	c := Default()
	want := verdict.Settings{CollapseRatio: 0.33, MinText: 200, Agree: 3, AgreeSpan: 30 * time.Minute}
	if got := c.Verdict.Settings(); got != want {
		t.Errorf("default settings %+v, want %+v", got, want)
	}
	if c.Verdict.KeepBytes != 32<<20 {
		t.Errorf("default keep_bytes %d", c.Verdict.KeepBytes)
	}
	c, err := Parse([]byte("verdict:\n  collapse_ratio: 0.5\n  min_text: 50\n  agree: 2\n  agree_span: 1h\n  keep_bytes: 8MiB\n" +
		"routes:\n  - name: p\n    match: prefix\n    path: /p/\n    expect: {selector: '#add-to-cart', text: Add to cart}\n  - {name: a, match: prefix, path: /}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = verdict.Settings{CollapseRatio: 0.5, MinText: 50, Agree: 2, AgreeSpan: time.Hour}
	if got := c.Verdict.Settings(); got != want || c.Verdict.KeepBytes != 8<<20 {
		t.Errorf("settings %+v keep %d, want %+v keep 8MiB", got, c.Verdict.KeepBytes, want)
	}
	exp, err := c.Routes[0].Expect.Compile()
	if err != nil || exp == nil || !exp.Found([]byte(`<button id=add-to-cart>Add to cart</button>`)) || exp.Found([]byte(`<p>Add to cart</p>`)) {
		t.Errorf("routes[0].expect compiled to %v, %v", exp, err)
	}
	if exp, err := c.Routes[1].Expect.Compile(); exp != nil || err != nil {
		t.Errorf("a route without expect compiled to %v, %v; want nil, nil", exp, err)
	}
}

// Every refusal of a verdict key or a route's expect names its key and its line.
func TestVerdictRefusalsNameTheirKeyAndLine(t *testing.T) {
	checkRefusals(t, []refusal{
		{"verdict:\n  collapse_ratio: 1.5\n", "line 2: verdict.collapse_ratio"},
		{"verdict:\n  collapse_ratio: -0.1\n", "line 2: verdict.collapse_ratio"},
		{"verdict:\n  min_text: -1\n", "line 2: verdict.min_text"},
		{"verdict:\n  agree: 101\n", "line 2: verdict.agree"},
		{"verdict:\n  agree_span: -1m\n", "line 2: verdict.agree_span"},
		{"verdict:\n  keep_bytes: 1KiB\n", "line 2: verdict.keep_bytes"},
		{"routes:\n  - name: a\n    match: prefix\n    path: /\n    expect:\n      selector: 'div:has(p)'\n", "line 6: routes[0].expect.selector"},
		{"routes:\n  - name: a\n    match: prefix\n    path: /\n    expect:\n      selector: 'div['\n", "line 6: routes[0].expect.selector"},
		{"routes:\n  - name: a\n    match: prefix\n    path: /\n    expect: {text: '  '}\n", "line 5: routes[0].expect.text"},
		{"routes:\n  - name: a\n    match: prefix\n    path: /\n    expect: {colour: red}\n", `[5:14] unknown field "colour"`},
	})
}

func TestVerdictBoundsAreTheirConstants(t *testing.T) {
	for _, tc := range []struct {
		path     string
		at, past func(*Config)
	}{
		{"verdict.collapse_ratio", func(c *Config) { c.Verdict.CollapseRatio = VerdictCollapseRatioMin },
			func(c *Config) { c.Verdict.CollapseRatio = VerdictCollapseRatioMin / 2 }},
		{"verdict.min_text", func(c *Config) { c.Verdict.MinText = VerdictMinTextMax }, func(c *Config) { c.Verdict.MinText = VerdictMinTextMax + 1 }},
		{"verdict.agree", func(c *Config) { c.Verdict.Agree = VerdictAgreeMax }, func(c *Config) { c.Verdict.Agree = VerdictAgreeMax + 1 }},
		{"verdict.keep_bytes", func(c *Config) { c.Verdict.KeepBytes = VerdictKeepBytesMin }, func(c *Config) { c.Verdict.KeepBytes = VerdictKeepBytesMin - 1 }},
		{"verdict.keep_bytes", func(c *Config) { c.Verdict.KeepBytes = VerdictKeepBytesMax }, func(c *Config) { c.Verdict.KeepBytes = VerdictKeepBytesMax + 1 }},
	} {
		at := Default()
		tc.at(at)
		if err := at.Validate(); err != nil {
			t.Errorf("%s at its bound: %v", tc.path, err)
		}
		past := Default()
		tc.past(past)
		var fe *FieldError
		if err := past.Validate(); !errors.As(err, &fe) || fe.Path != tc.path {
			t.Errorf("%s past its bound: got %v, want a refusal naming it", tc.path, err)
		}
	}
}
