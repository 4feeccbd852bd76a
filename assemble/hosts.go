package assemble

import (
	"maps"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
)

// HostsLimits narrows render.hosts to politeness's limits.
func HostsLimits(c config.Hosts) hosts.Limits {
	return hosts.Limits{MaxConcurrency: c.MaxConcurrency, Overrides: maps.Clone(c.Overrides), MaxPause: c.MaxPause.D(),
		HalveAfter: c.HalveAfter, GrowAfter: c.GrowAfter}
}
