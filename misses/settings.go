package misses

import (
	"math"
	"time"

	"github.com/freshq/freshq/cachekey"
)

// Settings bound render on miss (Flights) and the crawler listener's moves of expired rows,
// narrowed from one configuration where the node is assembled (assemble/node).
type Settings struct {
	Domains []string        // render.domains: only their pages are rendered on miss
	Sites   *cachekey.Sites // the sites of render.domains; nil: computed from Domains (a test's)

	Flights int // flights at once: ⌈queue.lanes.urgent_max_share × queue.ready.capacity⌉
	Waiters int // page.max_waiters: requests waiting at once
	// SiteWaiters is page.max_site_waiters: requests waiting at once for the pages of one
	// site; 0 leaves a site only Waiters (a test's settings).
	SiteWaiters int
	Rate        float64       // serve.miss_rate: new targets (and moves up) per second per site
	Burst       int           // serve.miss_burst
	MaxWait     time.Duration // page.max_wait: the longest ?wait= a request may ask for
}

// SiteOf is the site of key's host (cachekey.Sites of render.domains): the unit the waiters'
// share and the rate of new targets are kept by, as politeness's are, so that no spelling of
// a host, no port and no subdomain of a site multiplies them.
func (s *Settings) SiteOf(key []byte) string {
	if s.Sites == nil {
		return cachekey.NewSites(s.Domains).OfKey(key)
	}
	return s.Sites.OfKey(key)
}

// MaxFlights is ⌈share × capacity⌉: each flight is a rush, served from the urgent lane's share
// of a batch (the small epsilon keeps a product like 0.1 × 30 from rounding up to 4).
func MaxFlights(urgentShare float64, readyCapacity int) int {
	return int(math.Ceil(urgentShare*float64(readyCapacity) - 1e-9))
}
