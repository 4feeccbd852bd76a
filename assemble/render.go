package assemble

import (
	"slices"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/render/chrome"
)

// RenderOptions narrows render.* to what the http, exec and sim renderers use.
func RenderOptions(c config.Render) render.Options {
	return render.Options{
		Renderer: c.Renderer, Concurrency: c.Concurrency, Timeout: c.Timeout.D(), Domains: c.Domains,
		UserAgent: c.Marked(c.UserAgent), UserAgents: marked(&c), MaxBody: int64(c.MaxBody), MaxRedirects: c.MaxRedirects,
		ExecCommand: c.Exec.Command,
		Sim: render.SimOptions{Seed: c.Sim.Seed, LatencyMedian: c.Sim.LatencyMedian.D(), TransientRate: c.Sim.TransientRate,
			GoneRate: c.Sim.GoneRate, NoindexRate: c.Sim.NoindexRate},
	}
}

// marked is render.user_agents, each ending with render.user_agent_suffix (config.Render.Marked).
func marked(c *config.Render) map[string]string {
	if c.UserAgents == nil {
		return nil
	}
	out := make(map[string]string, len(c.UserAgents))
	for dev, ua := range c.UserAgents {
		out[dev] = c.Marked(ua)
	}
	return out
}

// ChromeOptions narrows render.* and render.chrome.* to what the chrome renderer uses, with
// every device a cache key may name resolved to its emulation (config.Render.Emulation).
func ChromeOptions(c config.Render) chrome.Options {
	devices := make(map[string]chrome.Device)
	for name := range c.DeviceNames() {
		devices[name] = chrome.Device(c.Emulation(name))
	}
	devices[config.DefaultDevice] = chrome.Device(c.Emulation(config.DefaultDevice))
	ch := c.Chrome
	block := ch.Block
	if ch.BlockThirdParties == nil || *ch.BlockThirdParties {
		block = append(slices.Clip(block), config.ChromeThirdParties()...)
	}
	var allow []chrome.Allow
	for _, a := range ch.Allow {
		e := chrome.Allow{Match: a.Match, Path: a.Path}
		for _, l := range a.Load {
			if slices.Contains(config.ChromeResourceTypes, l) {
				e.Types = append(e.Types, l)
			} else {
				e.Patterns = append(e.Patterns, l)
			}
		}
		allow = append(allow, e)
	}
	return chrome.Options{
		Options: RenderOptions(c),
		Path:    ch.Path, Idle: ch.Idle.D(), Settle: ch.Settle.D(), LongRequest: ch.LongRequest.D(), DataWait: ch.DataWait.D(), CacheMaxAge: ch.CacheMaxAge.D(), BlockTypes: ch.BlockTypes, Block: block, Allow: allow,
		KeepScripts: ch.KeepScripts, RecycleAfter: ch.RecycleAfter, MaxRSS: int64(ch.MaxRSS), User: ch.User,
		NoSandbox: ch.NoSandbox, Nice: ch.Nice, Devices: devices, DefaultDevice: config.DefaultDevice,
	}
}
