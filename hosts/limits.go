package hosts

import (
	"time"

	"github.com/freshq/freshq/cachekey"
)

// Limits is render.hosts as politeness uses it: how many renders of one site may be in flight
// at once (MaxConcurrency, or the site's override), the longest pause a Retry-After may ask
// for, and the streaks that halve and grow a site's limit. It is narrowed from the
// configuration where the node is assembled (assemble.HostsLimits) and read whole at each
// decision, so a reload applies to the next one.
//
// Politeness is kept per site (Site), not per host as a URL spells it: every port and every
// subdomain of a render.domains entry is that entry's site, so that no spelling of a host, no
// port and no subdomain multiplies a site's renders in flight. The "host" of the host table,
// of /v1/queue and of the host metrics is that site.
type Limits struct {
	MaxConcurrency int            // renders in flight per site, across the node's render workers
	Overrides      map[string]int // per site (a render.domains entry, or a host no entry names), instead of MaxConcurrency
	MaxPause       time.Duration  // the longest pause a Retry-After can ask for
	HalveAfter     int            // consecutive 5xx or timeouts halve the site's limit
	GrowAfter      int            // consecutive successes raise it by one, up to its maximum
	// Sites maps a key's host to its site (render.domains); nil names no entry: each host is
	// its own site without its port.
	Sites *cachekey.Sites
}

// Max is the most renders of site that may be in flight at once: its override, else
// MaxConcurrency.
func (l *Limits) Max(site []byte) int {
	if n, ok := l.Overrides[string(site)]; ok {
		return n
	}
	return l.MaxConcurrency
}

// Site is the unit politeness keeps key by: the site of its host (cachekey.Sites), nil for a
// key without a host. The result is read only (the key's memory or the Sites').
func (l *Limits) Site(key []byte) []byte {
	return l.Sites.SiteOfKey(key) // read only; no allocation for a canonical key
}
