package chrome

import (
	"net/url"
	"strings"
	"time"

	"github.com/chromedp/cdproto/network"

	"github.com/freshq/freshq/render"
)

// Options are what the chrome renderer needs of the configuration (render.* and
// render.chrome.*), narrowed from it where the node is assembled (package assemble).
type Options struct {
	render.Options // what every renderer shares: timeout, domains, body and redirect bounds

	Path         string        // render.chrome.path: the browser's executable
	Idle         time.Duration // render.chrome.idle: network quiet after load that makes a page ready
	Settle       time.Duration // render.chrome.settle: quiet after the page's own data requests were answered that makes it ready; 0 or over Idle: Idle
	LongRequest  time.Duration // render.chrome.long_request: a request older than this no longer holds idleness
	DataWait     time.Duration // render.chrome.data_wait: a same-site XHR or fetch holds idleness until this old
	CacheMaxAge  time.Duration // render.chrome.cache_max_age: the browser's cache is cleared when last cleared longer ago; 0: never by age
	BlockTypes   []string      // render.chrome.block_types: resource types refused before they load
	Block        []string      // render.chrome.block: URL patterns refused before they load
	Allow        []Allow       // render.chrome.allow: what the pages of a path may load despite BlockTypes and Block
	KeepScripts  bool          // render.chrome.keep_scripts: keep <script> elements in the captured page
	RecycleAfter int           // render.chrome.recycle_after: renders, then the browser restarts
	MaxRSS       int64         // render.chrome.max_rss: the browser's resident bytes that restart it
	User         string        // render.chrome.user: the account the browser runs as under root
	NoSandbox    bool          // render.chrome.no_sandbox
	Nice         int           // render.chrome.nice: added to the worker's niceness for the browser and its helpers

	// Devices is how each device a cache key may name is presented, resolved from
	// render.devices, render.user_agents and the built-in devices; DefaultDevice's entry is used
	// for "" and for a name not in it.
	Devices       map[string]Device
	DefaultDevice string
}

// Allow is an entry of render.chrome.allow: the pages whose URL path Match (exact, prefix or
// contains, as routes match) and Path take may load what it names: resource types (lifting those
// BlockTypes entries) and URL patterns (letting matching URLs through Block and BlockTypes).
type Allow struct {
	Match, Path     string
	Types, Patterns []string
}

// allowance is an Allow compiled.
type allowance struct {
	match, path string
	types       map[network.ResourceType]bool
	patterns    []pattern
}

func compileAllow(a Allow) allowance {
	c := allowance{match: a.Match, path: a.Path, types: map[network.ResourceType]bool{}}
	for _, t := range a.Types {
		c.types[resourceType(t)] = true
	}
	for _, p := range a.Patterns {
		c.patterns = append(c.patterns, compilePattern(p))
	}
	return c
}

// allowanceFor is the allowance of the page at raw: the first entry whose match takes its path,
// nil for none (or a URL that does not parse, which is refused anyway).
func (r *Renderer) allowanceFor(raw string) *allowance {
	if len(r.allow) == 0 {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	for i := range r.allow {
		a := &r.allow[i]
		var ok bool
		switch a.match {
		case "exact":
			ok = path == a.path
		case "prefix":
			ok = strings.HasPrefix(path, a.path)
		case "contains":
			ok = strings.Contains(path, a.path)
		}
		if ok {
			return a
		}
	}
	return nil
}

// lets reports whether a lets a request of type typ to raw load despite a block: its type
// named, or its URL matched. A nil allowance lets nothing.
func (a *allowance) lets(typ network.ResourceType, raw string, byType bool) bool {
	if a == nil {
		return false
	}
	if byType && a.types[typ] {
		return true
	}
	for _, p := range a.patterns {
		if p.match(raw) {
			return true
		}
	}
	return false
}

// Device is one device's emulation: viewport, pixel ratio, mobile and its User-Agent.
type Device struct {
	Width, Height int
	Scale         float64 // never 0
	Mobile        bool
	UserAgent     string
}

// device is the emulation of a device name (Options.Devices).
func (o *Options) device(name string) Device {
	if d, ok := o.Devices[name]; ok {
		return d
	}
	return o.Devices[o.DefaultDevice]
}
