package config

import (
	"strings"
	"testing"
)

// The crawler listener's keys are refused out of range, each with its line: a listener beyond
// loopback without a token would serve anyone, and the admin token there would hand the whole
// API's secret to every site's middleware.
func TestServeKeysAreValidated(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"serve:\n  listen: \":3000\"\n", "serve.tokens: required when serve.listen (:3000) is beyond loopback"},
		{"serve:\n  listen: nonsense\n", "line 2: serve.listen: must be an address"},
		{"token: s3cret\nserve:\n  listen: 127.0.0.1:3000\n  tokens: [s3cret]\n", "line 4: serve.tokens[0]: must not be the admin token"},
		{"serve:\n  listen: 127.0.0.1:8420\n", "serve.listen: must differ from listen"},
		{"serve:\n  wait: 11m\n", "line 2: serve.wait: must be a positive duration at most 10m0s"},
		{"serve:\n  miss_rate: -1\n", "line 2: serve.miss_rate: must be a positive number"},
		{"serve:\n  miss_burst: 0\n", "line 2: serve.miss_burst"},
		{"serve:\n  mobile_agents: [\" \"]\n", "serve.mobile_agents[0]: must not be blank"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	c, err := Parse([]byte("serve:\n  listen: 127.0.0.1:3000\nroutes:\n  - {name: p, match: prefix, path: /p/, serve_stale: false}\n"))
	if err != nil || c.Serve.Listen != "127.0.0.1:3000" || c.Serve.Wait != ServeWaitDefault || c.Routes[0].ServeStale == nil || *c.Routes[0].ServeStale {
		t.Fatalf("%+v %v", c.Serve, err)
	}
	c, err = Parse([]byte("serve:\n  listen: \":3000\"\n  tokens: [crawler-token]\n"))
	if err != nil || len(c.Serve.Tokens) != 1 {
		t.Fatalf("%+v %v", c.Serve, err)
	}
}
