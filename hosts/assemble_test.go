package hosts_test

import (
	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/hosts"
)

func init() { hosts.LimitsOf = assemble.HostsLimits }
