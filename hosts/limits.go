package hosts

import "time"

// Limits is render.hosts as politeness uses it: how many renders of one host may be in flight
// at once (MaxConcurrency, or the host's override), the longest pause a Retry-After may ask
// for, and the streaks that halve and grow a host's limit. It is narrowed from the
// configuration where the node is assembled (assemble.HostsLimits) and read whole at each
// decision, so a reload applies to the next one.
type Limits struct {
	MaxConcurrency int            // renders in flight per host, across the node's render workers
	Overrides      map[string]int // per host (as in the URL: host[:port]), instead of MaxConcurrency
	MaxPause       time.Duration  // the longest pause a Retry-After can ask for
	HalveAfter     int            // consecutive 5xx or timeouts halve the host's limit
	GrowAfter      int            // consecutive successes raise it by one, up to its maximum
}

// Max is the most renders of host that may be in flight at once: its override, else
// MaxConcurrency.
func (l *Limits) Max(host []byte) int {
	if n, ok := l.Overrides[string(host)]; ok {
		return n
	}
	return l.MaxConcurrency
}
