package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultsAreValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Queue.LeaseTTL.D() != 10*time.Minute || c.Queue.MaxLeases != 4096 || c.Queue.Ready.Capacity != 5000 ||
		c.Queue.ClaimFloor.Guard.D() != 5*time.Minute || c.Queue.ClaimFloor.UnpinAfter.D() != time.Hour ||
		c.Queue.Ready.SweepCap != 500_000 || c.Queue.Ready.SubmittedBoost != 2 || c.Queue.Lanes.UrgentMaxShare != 0.2 ||
		*c.Queue.Lanes.MinShare.Discovered != 0.10 || *c.Queue.Lanes.MinShare.Cold != 0.02 ||
		c.Render.DefaultInterval.D() != 24*time.Hour || c.Page.SWRTTL.D() != 3*time.Hour || c.Sitemap.MinTTL.D() != 6*time.Hour ||
		!c.ReadyEnabled() || *c.Render.FailureRetry.FastRetries != 2 || c.Render.FailureRetry.MaxBackoff.D() != 7*day {
		t.Fatalf("defaults differ from the documented ones (docs/CONFIGURATION.md): %+v", c)
	}
}

func TestParseFullFile(t *testing.T) {
	c, err := Parse([]byte(`
data_dir: /var/lib/freshq
workers: 4
queue:
  lease_ttl: 15m
  ready:
    enabled: false
    sweep_interval: 2m
  lanes:
    min_share:
      discovered: 0   # zero is a real setting, not "use the default"
render:
  renderer: sim
  timeout: 90s
  failure_retry:
    max_backoff: 1d12h
  max_body: 5MiB
routes:
  - {name: home, match: exact, path: /, interval: 1h}
  - {name: catalog, match: prefix, path: /c/, interval: 24h, swr: 6h}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/var/lib/freshq" || c.Workers != 4 || c.Queue.LeaseTTL.D() != 15*time.Minute ||
		c.ReadyEnabled() || c.Queue.Ready.SweepInterval.D() != 2*time.Minute || *c.Queue.Lanes.MinShare.Discovered != 0 ||
		c.Render.Renderer != "sim" || c.Render.FailureRetry.MaxBackoff.D() != 36*time.Hour || c.Render.MaxBody != 5<<20 ||
		len(c.Routes) != 2 || c.Routes[1].SWR.D() != 6*time.Hour {
		t.Fatalf("parsed %+v", c)
	}
	if c.Queue.Ready.Capacity != 5000 {
		t.Fatal("an unset key was not defaulted")
	}
}

func TestUnknownKeyNamesItsLine(t *testing.T) {
	_, err := Parse([]byte("workers: 2\nqueue:\n  lease_ttl: 10m\n  leese_ttl: 10m\n"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "[4:") || !strings.Contains(err.Error(), "leese_ttl") {
		t.Fatalf("got %v, want an error at line 4 naming leese_ttl", err)
	}
}

func TestBadValuesNameTheirLine(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string
	}{
		{"workers: 2\nrender:\n  timeout: 11m\n", "line 3: render.timeout"},
		{"queue:\n  lease_ttl: 1m\n", "line 2: queue.lease_ttl"},
		{"\n\nrender:\n  default_interval: -1h\n", "line 4: render.default_interval"},
		{"routes:\n  - {name: a, match: exact, path: /}\n  - {name: b, match: glob, path: /x}\n", "line 3: routes[1].match"},
		{"queue:\n  lanes:\n    urgent_max_share: 0.9\n", "line 2: queue.lanes"}, // the key's own line, not its block's
		{"render:\n  renderer: exec\n", "line 1: render.exec.command"},           // absent: its nearest parent
		{"render:\n  domains:\n    - example.com\n    - https://example.org/\n", "line 4: render.domains[1]"},
		{"render:\n  domains: [\"\"]\n", "line 2: render.domains"},
		{"render:\n  domains: [\"*.example.com\"]\n", "line 2: render.domains"},
		{"render:\n  domains: [\"example.com:8080\"]\n", "line 2: render.domains"},
		{"render:\n  user_agents:\n    mobile: \"  \"\n", "line 3: render.user_agents.mobile"},
		{"render:\n  user_agent_suffix: \"a\\nb\"\n", "line 2: render.user_agent_suffix"},
		{"render:\n  user_agent_suffix: " + strings.Repeat("x", 129) + "\n", "line 2: render.user_agent_suffix"},
	} {
		_, err := Parse([]byte(tc.yaml))
		var fe *FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestRenderDomainsAndUserAgents(t *testing.T) {
	c, err := Parse([]byte(`
render:
  domains: [example.com, www.example.org., bücher.example, 10.0.0.1, "::1"]
  user_agents:
    mobile: Mozilla/5.0 (Linux; Android 10) freshq/1
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Render.Domains) != 5 || c.Render.UserAgents["mobile"] != "Mozilla/5.0 (Linux; Android 10) freshq/1" {
		t.Fatalf("parsed %+v", c.Render)
	}
}

func TestUnparsableDurationAndSize(t *testing.T) {
	for _, y := range []string{"queue:\n  lease_ttl: soon\n", "render:\n  max_body: 5XB\n", "queue:\n  lease_ttl: -3d\n"} {
		if _, err := Parse([]byte(y)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "[2:") {
			t.Errorf("%q: got %v, want an error at line 2", y, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90s": 90 * time.Second, "7d": 7 * day, "1d12h": 36 * time.Hour, "0d30m": 30 * time.Minute, "2h": 2 * time.Hour,
	} {
		got, err := ParseDuration(in)
		if err != nil || got.D() != want {
			t.Errorf("%q: got %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "xd", "1d1d", "1w"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
}

func TestLoadReadsTokenFromEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "freshq.yaml")
	if err := os.WriteFile(path, []byte("token: from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FRESHQ_TOKEN", "from-env")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "from-env" {
		t.Fatalf("token %q", c.Token)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestParseBareTagDoesNotPanic: the YAML decoder panics on a bare tag as a sequence's value; a
// configuration arrives over HTTP too (POST /v1/plan), so Parse refuses it with its line.
func TestParseBareTagDoesNotPanic(t *testing.T) {
	for _, in := range []string{"routes: ! ", "render:\n  default_interval: 24h\nroutes: ! \n"} {
		c, err := Parse([]byte(in))
		if err == nil || c != nil || !errors.Is(err, ErrInvalid) {
			t.Fatalf("%q: %v, %v", in, c, err)
		}
		if want := strings.Count(in[:strings.Index(in, "!")], "\n") + 1; !strings.Contains(err.Error(), fmt.Sprintf("line %d", want)) {
			t.Errorf("%q: %v, want line %d", in, err, want)
		}
	}
}
