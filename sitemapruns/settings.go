package sitemapruns

import (
	"time"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/sitemap"
)

// Settings is what a sitemap run reads, narrowed from one configuration where the node is
// assembled (assemble/node), so that a run's keys, domains and fetcher agree.
type Settings struct {
	// Keying is the devices a target may name and the key rules of the policy in force
	// (intake.KeyingOf).
	Keying  intake.Keying
	Domains []string // render.domains: a sitemap's hosts must be under them
	// Fetch is the fetcher's options (render.domains, render.timeout, render.user_agent,
	// sitemap.max_depth, sitemap.max_decompressed).
	Fetch sitemap.Options
	// MinTTL is sitemap.min_ttl: the floor of a <changefreq> cadence.
	MinTTL time.Duration
	// URLs are sitemap.urls, read by Runs at start and again every Refetch (sitemap.refetch)
	// by the node's clock; none: only what is posted is read.
	URLs    []string
	Refetch time.Duration
}
