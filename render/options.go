package render

import "time"

// Options are what the renderers need of the configuration (render.*), narrowed from it where
// the node is assembled (package assemble), so that this package reads no configuration of its
// own and a test states every value a renderer runs with.
type Options struct {
	Renderer     string            // render.renderer: http, exec or sim (chrome is render/chrome's)
	Concurrency  int               // render.concurrency: renders in flight per worker
	Timeout      time.Duration     // render.timeout: the whole render, every stage included
	Domains      []string          // render.domains: the hosts a render may fetch; empty is any
	UserAgent    string            // render.user_agent
	UserAgents   map[string]string // render.user_agents: per device, instead of UserAgent
	MaxBody      int64             // render.max_body: bytes of one page
	MaxRedirects int               // render.max_redirects
	ExecCommand  []string          // render.exec.command: the exec renderer's program and arguments
	Sim          SimOptions        // render.sim
}

// SimOptions shape the simulated renderer (render.sim).
type SimOptions struct {
	Seed          int64
	LatencyMedian time.Duration
	TransientRate float64 // share of renders that fail transiently (a 503)
	GoneRate      float64 // share of URLs that are gone
	NoindexRate   float64 // share of URLs that are noindex
}
