package config

import (
	"errors"
	"testing"
	"time"
)

// Each bound Validate enforces is its named constant: the value at the bound is accepted and
// the one just past it is refused, naming the key. A literal left in Validate beside the
// constant fails here.
func TestBoundsAreTheirConstants(t *testing.T) {
	for _, tc := range []struct {
		path     string
		at, past func(*Config)
	}{
		{"workers", func(c *Config) { c.Workers = WorkersMax }, func(c *Config) { c.Workers = WorkersMax + 1 }},
		{"queue.lease_ttl", func(c *Config) { c.Queue.LeaseTTL = LeaseTTLMin; c.Render.Timeout = Duration(time.Minute) },
			func(c *Config) { c.Queue.LeaseTTL = LeaseTTLMin - 1; c.Render.Timeout = Duration(time.Minute) }},
		{"queue.max_leases", func(c *Config) { c.Queue.MaxLeases, c.Queue.MaxRemoteLeases = MaxLeasesMin, 1 },
			func(c *Config) { c.Queue.MaxLeases, c.Queue.MaxRemoteLeases = MaxLeasesMin-1, 1 }},
		{"queue.max_leases", func(c *Config) { c.Queue.MaxLeases = MaxLeasesMax }, func(c *Config) { c.Queue.MaxLeases = MaxLeasesMax + 1 }},
		{"queue.ready.capacity", func(c *Config) { c.Queue.Ready.Capacity, c.Queue.Ready.SweepCap = ReadyCapacityMax, ReadyCapacityMax },
			func(c *Config) {
				c.Queue.Ready.Capacity, c.Queue.Ready.SweepCap = ReadyCapacityMax+1, ReadyCapacityMax+1
			}},
		{"queue.ready.key_capacity", func(c *Config) { c.Queue.Ready.KeyCapacity = KeyCapacityMin }, func(c *Config) { c.Queue.Ready.KeyCapacity = KeyCapacityMin - 1 }},
		{"queue.ready.key_capacity", func(c *Config) { c.Queue.Ready.KeyCapacity = KeyCapacityMax }, func(c *Config) { c.Queue.Ready.KeyCapacity = KeyCapacityMax + 1 }},
		{"queue.ready.submitted_boost", func(c *Config) { c.Queue.Ready.SubmittedBoost = SubmittedBoostMin }, func(c *Config) { c.Queue.Ready.SubmittedBoost = SubmittedBoostMin - 0.01 }},
		{"queue.ready.submitted_boost", func(c *Config) { c.Queue.Ready.SubmittedBoost = SubmittedBoostMax }, func(c *Config) { c.Queue.Ready.SubmittedBoost = SubmittedBoostMax + 0.01 }},
		{"render.concurrency", func(c *Config) { c.Render.Concurrency = ConcurrencyMax }, func(c *Config) { c.Render.Concurrency = ConcurrencyMax + 1 }},
		{"render.max_body", func(c *Config) { c.Render.MaxBody = MaxPageBody }, func(c *Config) { c.Render.MaxBody = MaxPageBody + 1 }},
		{"render.failure_retry.factor", func(c *Config) { c.Render.FailureRetry.Factor = FactorMin }, func(c *Config) { c.Render.FailureRetry.Factor = FactorMin - 0.01 }},
		{"render.failure_retry.non_sitemap_penalty", func(c *Config) { c.Render.FailureRetry.NonSitemapPenalty = NonSitemapPenaltyMin },
			func(c *Config) { c.Render.FailureRetry.NonSitemapPenalty = NonSitemapPenaltyMin - 0.01 }},
		{"sitemap.max_depth", func(c *Config) { c.Sitemap.MaxDepth = MaxDepthMax }, func(c *Config) { c.Sitemap.MaxDepth = MaxDepthMax + 1 }},
		{"http.max_conns", func(c *Config) { c.HTTP.MaxConns = MaxConnsMax }, func(c *Config) { c.HTTP.MaxConns = MaxConnsMax + 1 }},
		{"render.hosts.max_concurrency", func(c *Config) { c.Render.Hosts.MaxConcurrency = HostsMaxConcurrencyMax },
			func(c *Config) { c.Render.Hosts.MaxConcurrency = HostsMaxConcurrencyMax + 1 }},
		{"render.hosts.max_pause", func(c *Config) { c.Render.Hosts.MaxPause = HostsMinPause }, func(c *Config) { c.Render.Hosts.MaxPause = HostsMinPause - 1 }},
		{"render.hosts.halve_after", func(c *Config) { c.Render.Hosts.HalveAfter = HostsStreakMax }, func(c *Config) { c.Render.Hosts.HalveAfter = HostsStreakMax + 1 }},
		{"render.hosts.grow_after", func(c *Config) { c.Render.Hosts.GrowAfter = HostsStreakMax }, func(c *Config) { c.Render.Hosts.GrowAfter = HostsStreakMax + 1 }},
		{"render.hosts.overrides.a.test", func(c *Config) { c.Render.Hosts.Overrides = map[string]int{"a.test": HostsMaxConcurrencyMax} },
			func(c *Config) { c.Render.Hosts.Overrides = map[string]int{"a.test": HostsMaxConcurrencyMax + 1} }},
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

// Default is EnsureDefaults on the zero Config, and EnsureDefaults returns its receiver, the
// shape badgerstore.Options has too.
func TestEnsureDefaultsReturnsItsReceiver(t *testing.T) {
	c := &Config{}
	if c.EnsureDefaults() != c || c.Queue.LeaseTTL != LeaseTTLDefault || c.Queue.MaxRemoteLeases != MaxLeasesDefault/MaxRemoteLeasesDivisor {
		t.Fatalf("%+v", c.Queue)
	}
	d := LadderDefault()
	d[0] = 0
	if LadderDefault()[0] == 0 {
		t.Fatal("the default ladder is shared")
	}
}
