package hosts

import "github.com/freshq/freshq/config"

// LimitsOf narrows render.hosts as a node does: it is assemble.HostsLimits, set by
// assemble_test.go (an external test file, which may import assemble where this package's own
// tests may not), so these tests run with the limits a configuration gives, not a copy of the
// narrowing.
var LimitsOf func(config.Hosts, ...string) Limits
