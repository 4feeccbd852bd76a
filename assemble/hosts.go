package assemble

import (
	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
)

// HostsLimits narrows render.hosts to politeness's limits, kept per site of domains
// (render.domains). An override names a site; one that names a host with a port, or a
// subdomain, of a site is that site's (the key a cache key's host is folded into), and when
// several fold into one site the lowest applies: politeness errs on the side of fewer renders.
func HostsLimits(c config.Hosts, domains ...string) hosts.Limits {
	sites := cachekey.NewSites(domains)
	var overrides map[string]int
	if c.Overrides != nil {
		overrides = make(map[string]int, len(c.Overrides))
		for host, n := range c.Overrides {
			site := sites.Of([]byte(host))
			if cur, ok := overrides[site]; !ok || n < cur {
				overrides[site] = n
			}
		}
	}
	return hosts.Limits{MaxConcurrency: c.MaxConcurrency, Overrides: overrides, MaxPause: c.MaxPause.D(),
		HalveAfter: c.HalveAfter, GrowAfter: c.GrowAfter, Sites: sites}
}
