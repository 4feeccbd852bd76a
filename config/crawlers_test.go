package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The client address and crawler verification keys are refused out of range, each with its
// line: a header that is no header name, a proxy that is no CIDR, lookups unbounded, a family
// table with a name outside the counted set or a suffix a whole top-level domain would match.
func TestServeCrawlerKeysAreValidated(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"serve:\n  client_ip_header: \"X Forwarded\"\n", "line 2: serve.client_ip_header: must be a header name"},
		{"serve:\n  trusted_proxies: [10.0.0.1]\n", "line 2: serve.trusted_proxies[0]: must be a CIDR"},
		{"serve:\n  verify:\n    timeout: 31s\n", "line 3: serve.verify.timeout: must be a positive duration at most 30s"},
		{"serve:\n  verify:\n    concurrency: 5000\n", "line 3: serve.verify.concurrency: must be 1..4096"},
		{"serve:\n  verify:\n    cache_entries: -1\n", "line 3: serve.verify.cache_entries"},
		{"serve:\n  verify:\n    cache_ttl: 200h\n", "line 3: serve.verify.cache_ttl"},
		{"serve:\n  crawlers:\n    - family: mybot\n      agents: [MyBot]\n", "line 3: serve.crawlers[0].family: must be one of google"},
		{"serve:\n  crawlers:\n    - family: google\n      agents: [Googlebot]\n      reverse_dns: [.com]\n", "line 5: serve.crawlers[0].reverse_dns[0]: must be a domain name"},
		{"serve:\n  crawlers:\n    - family: openai\n      agents: [GPTBot]\n      ranges: [nonsense]\n", "line 5: serve.crawlers[0].ranges[0]: must be a CIDR"},
		{"serve:\n  crawlers:\n    - family: openai\n", "serve.crawlers[0].agents: must list 1..64"},
		{"serve:\n  crawlers:\n    - {family: openai, agents: [a]}\n    - {family: openai, agents: [b]}\n", "serve.crawlers[1].family: \"openai\" is given twice"},
		{"serve:\n  crawlers:\n    - family: openai\n      agents: [GPTBot]\n      device: tv\n", "serve.crawlers[0].device: must be one of render's devices (desktop, mobile), got \"tv\""},
		{"serve:\n  mobile_agents: [\"" + strings.Repeat("x", 129) + "\"]\n", "line 2: serve.mobile_agents[0]: must be at most 128 bytes"},
		{"serve:\n  mobile_agents: [" + strings.Repeat("a, ", 64) + "a]\n", "line 2: serve.mobile_agents: lists 65 User-Agent substrings, at most 64"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// Verification is on by default exactly when a client address header is configured: without
// one the peer is the middleware, whose address verifies nothing. Either may be said outright.
func TestServeVerifyCrawlersDefault(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want bool
	}{
		{"serve: {}\n", false},
		{"serve:\n  client_ip_header: X-Forwarded-For\n", true},
		{"serve:\n  client_ip_header: X-Forwarded-For\n  verify_crawlers: false\n", false},
		{"serve:\n  verify_crawlers: true\n", true},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if *c.Serve.VerifyCrawlers != tc.want {
			t.Errorf("%q: verify_crawlers %v, want %v", tc.yaml, *c.Serve.VerifyCrawlers, tc.want)
		}
		if c.Serve.Verify.Timeout.D() != 2*time.Second || c.Serve.Verify.CacheEntries != ServeVerifyCacheEntriesDefault {
			t.Errorf("%q: verify %+v", tc.yaml, c.Serve.Verify)
		}
	}
}

// The verifier's bounds are read when the crawler listener starts (its cache lives as long as
// the listener), so a reload that changes one is refused at its line; the client address and
// the family table apply live.
func TestServeVerifyIsRestartOnly(t *testing.T) {
	running := Default()
	for yaml, path := range map[string]string{
		"serve: {verify: {timeout: 1s}}\n":                          "serve.verify.timeout",
		"serve: {verify: {concurrency: 8}}\n":                       "serve.verify.concurrency",
		"serve: {verify: {cache_entries: 10}}\n":                    "serve.verify.cache_entries",
		"serve: {verify: {cache_ttl: 5m}}\n":                        "serve.verify.cache_ttl",
		"serve: {client_ip_header: X-Real-IP}\n":                    "",
		"serve: {crawlers: [{family: openai, agents: [GPTBot]}]}\n": "",
	} {
		next, err := Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		err = CheckReload(running, next, []byte(yaml))
		var fe *FieldError
		if path == "" && err != nil || path != "" && (!errors.As(err, &fe) || fe.Path != path || fe.Line != 1) {
			t.Errorf("%s: %v, want a refusal at %q", yaml, err, path)
		}
	}
}
