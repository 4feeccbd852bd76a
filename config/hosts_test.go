package config

import (
	"testing"
	"time"
)

func TestHostsDefaultsAndGoodValuesPass(t *testing.T) {
	h := Default().Render.Hosts
	if h.MaxConcurrency != 4 || h.MaxPause.D() != 10*time.Minute || h.HalveAfter != 3 || h.GrowAfter != 10 || len(h.Overrides) != 0 {
		t.Fatalf("defaults %+v", h)
	}
	c, err := Parse([]byte("render:\n  hosts:\n    max_concurrency: 2\n    max_pause: 1s\n    halve_after: 1\n    grow_after: 1\n" +
		"    overrides: {shop.example: 1, \"shop.example:8080\": 8, \"10.0.0.5\": 1024, \"[::1]:8443\": 3, \"[2001:db8::1]\": 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h = c.Render.Hosts
	if h.MaxConcurrency != 2 || h.MaxPause.D() != time.Second || h.Max([]byte("shop.example:8080")) != 8 || h.Max([]byte("other.example")) != 2 {
		t.Fatalf("parsed %+v", h)
	}
}

// Every refusal of a render.hosts value names its key and its line, and is the only problem.
func TestHostsRefusalsNameTheirKeyAndLine(t *testing.T) {
	checkRefusals(t, []refusal{
		{"render:\n  hosts:\n    max_concurrency: 0\n", "line 3: render.hosts.max_concurrency"},
		{"render:\n  hosts:\n    max_concurrency: 1025\n", "line 3: render.hosts.max_concurrency"},
		{"render:\n  hosts:\n    max_concurrency: -1\n", "line 3: render.hosts.max_concurrency"},
		{"render:\n  hosts:\n    max_pause: 0s\n", "line 3: render.hosts.max_pause"},
		{"render:\n  hosts:\n    max_pause: 999ms\n", "line 3: render.hosts.max_pause"},
		{"render:\n  hosts:\n    halve_after: 0\n", "line 3: render.hosts.halve_after"},
		{"render:\n  hosts:\n    halve_after: 1000001\n", "line 3: render.hosts.halve_after"},
		{"render:\n  hosts:\n    grow_after: 0\n", "line 3: render.hosts.grow_after"},
		{"render:\n  hosts:\n    grow_after: -3\n", "line 3: render.hosts.grow_after"},
		{"render:\n  hosts:\n    overrides:\n      shop.example: 0\n", "line 4: render.hosts.overrides.shop.example"},
		{"render:\n  hosts:\n    overrides:\n      shop.example: 1025\n", "line 4: render.hosts.overrides.shop.example"},
		{"render:\n  hosts:\n    overrides:\n      a.example: 1\n      Shop.Example: 2\n", "line 5: render.hosts.overrides.Shop.Example"},
		{"render:\n  hosts:\n    overrides:\n      \"https://shop.example\": 2\n", "line 4: render.hosts.overrides.https://shop.example"},
		{"render:\n  hosts:\n    overrides:\n      shop.example/x: 2\n", "line 4: render.hosts.overrides.shop.example/x"},
		{"render:\n  hosts:\n    overrides:\n      \"shop.example:0\": 2\n", "line 4: render.hosts.overrides.shop.example:0"},
		{"render:\n  hosts:\n    overrides:\n      \"shop.example:65536\": 2\n", "line 4: render.hosts.overrides.shop.example:65536"},
		{"render:\n  hosts:\n    overrides:\n      \"shop.example:\": 2\n", "line 4: render.hosts.overrides.shop.example:"},
		{"render:\n  hosts:\n    overrides:\n      \"::1\": 2\n", "line 4: render.hosts.overrides.::1"},
		{"render:\n  hosts:\n    overrides:\n      \"[::1\": 2\n", "line 3: render.hosts.overrides.[::1"}, // a key starting "[" reads as an index: the line of overrides
		{"render:\n  hosts:\n    overrides:\n      \"[10.0.0.1]\": 2\n", "line 3: render.hosts.overrides.[10.0.0.1]"},
		{"render:\n  hosts:\n    overrides:\n      \"*.shop.example\": 2\n", "line 4: render.hosts.overrides.*.shop.example"},
		{"render:\n  hosts:\n    overrides:\n      \"\": 2\n", "line 3: render.hosts.overrides.: must be"},
	})
}
