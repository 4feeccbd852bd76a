package config

import (
	"slices"
	"testing"
)

func TestKeysDropParams(t *testing.T) {
	if got := Default().Keys.DropParams; !slices.Equal(got, DropParamsDefault()) {
		t.Fatalf("default drop_params %v", got)
	}
	c, err := Parse([]byte("keys:\n  drop_params: []\n"))
	if err != nil || c.Keys.DropParams == nil || len(c.Keys.DropParams) != 0 {
		t.Fatalf("[] must be kept (drop none): %v, %#v", err, c.Keys.DropParams)
	}
	c, err = Parse([]byte("keys:\n  drop_params: [ref]\nroutes:\n  - {name: s, match: prefix, path: /s, keep_params: [q], trailing_slash: add}\n"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := c.KeyRules()
	if err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]string{
		"https://a.test/x?ref=1&utm_a=2": "https://a.test/x?utm_a=2", // the file's list replaces the default
		"https://a.test/s?x=1&q=2":       "https://a.test/s/?q=2",
	} {
		if got, err := rules.Normalize(raw); err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

// Every refusal of a keys or route key value names its key and its line.
func TestKeysRefusalsNameTheirKeyAndLine(t *testing.T) {
	checkRefusals(t, []refusal{
		{"keys:\n  drop_params:\n    - utm_*\n    - \"\"\n", "line 4: keys.drop_params[1]"},
		{"routes:\n  - name: a\n    match: prefix\n    path: /\n    trailing_slash: both\n", "line 5: routes[0].trailing_slash"},
		{"routes:\n  - name: a\n    match: prefix\n    path: /\n    keep_params: [q, \"\"]\n", "line 5: routes[0].keep_params[1]"},
	})
}
