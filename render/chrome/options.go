package chrome

import (
	"time"

	"github.com/freshq/freshq/render"
)

// Options are what the chrome renderer needs of the configuration (render.* and
// render.chrome.*), narrowed from it where the node is assembled (package assemble).
type Options struct {
	render.Options // what every renderer shares: timeout, domains, body and redirect bounds

	Path         string        // render.chrome.path: the browser's executable
	Idle         time.Duration // render.chrome.idle: network quiet after load that makes a page ready
	LongRequest  time.Duration // render.chrome.long_request: a request older than this no longer holds idleness
	DataWait     time.Duration // render.chrome.data_wait: a same-site XHR or fetch holds idleness until this old
	CacheMaxAge  time.Duration // render.chrome.cache_max_age: the browser's cache is cleared when last cleared longer ago; 0: never by age
	BlockTypes   []string      // render.chrome.block_types: resource types refused before they load
	Block        []string      // render.chrome.block: URL patterns refused before they load
	KeepScripts  bool          // render.chrome.keep_scripts: keep <script> elements in the captured page
	RecycleAfter int           // render.chrome.recycle_after: renders, then the browser restarts
	MaxRSS       int64         // render.chrome.max_rss: the browser's resident bytes that restart it
	User         string        // render.chrome.user: the account the browser runs as under root
	NoSandbox    bool          // render.chrome.no_sandbox

	// Devices is how each device a cache key may name is presented, resolved from
	// render.devices, render.user_agents and the built-in devices; DefaultDevice's entry is used
	// for "" and for a name not in it.
	Devices       map[string]Device
	DefaultDevice string
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
