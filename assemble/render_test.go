package assemble

import (
	"reflect"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/render/chrome"
)

// Every render.* and render.chrome.* value a renderer uses reaches its options: a file that sets
// each of them to something other than its default gets exactly those values, and no option is
// left at its zero value (a field added to the options and forgotten here fails this test).
func TestRenderOptionsCarryEveryValue(t *testing.T) {
	cfg, err := config.Parse([]byte(`
render:
  renderer: chrome
  concurrency: 3
  timeout: 7s
  domains: [shop.test]
  user_agent: "ua/1"
  user_agents: {mobile: "ua-mobile/1"}
  user_agent_suffix: "site-renders/3"
  max_body: 12345
  max_redirects: 4
  exec: {command: ["/bin/true", "-x"]}
  sim: {seed: 9, latency_median: 40ms, transient_rate: 0.1, gone_rate: 0.2, noindex_rate: 0.3}
  chrome:
    path: /opt/chromium
    idle: 300ms
    settle: 120ms
    long_request: 1500ms
    data_wait: 7s
    cache_max_age: 3m
    block_types: [image]
    block: ["*/ads/*"]
    block_third_parties: false
    allow: [{match: prefix, path: /landing/, load: [font, "*://cdn.test/*"]}]
    keep_scripts: true
    recycle_after: 17
    max_rss: 100MiB
    user: nobody
    no_sandbox: true
    nice: 19
  devices:
    tablet: {width: 800, height: 1200, scale: 2, mobile: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := render.Options{Renderer: "chrome", Concurrency: 3, Timeout: 7 * time.Second, Domains: []string{"shop.test"},
		UserAgent: "ua/1 site-renders/3", UserAgents: map[string]string{"mobile": "ua-mobile/1 site-renders/3"}, MaxBody: 12345, MaxRedirects: 4,
		ExecCommand: []string{"/bin/true", "-x"},
		Sim:         render.SimOptions{Seed: 9, LatencyMedian: 40 * time.Millisecond, TransientRate: 0.1, GoneRate: 0.2, NoindexRate: 0.3}}
	got := RenderOptions(cfg.Render)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("render options:\n got %+v\nwant %+v", got, want)
	}
	noZeroField(t, "render.Options", reflect.ValueOf(got))

	ch := ChromeOptions(cfg.Render)
	if !reflect.DeepEqual(ch.Options, want) {
		t.Fatalf("chrome's render options: %+v", ch.Options)
	}
	ch.Devices = map[string]chrome.Device{"tablet": ch.Devices["tablet"]} // compared below
	wantChrome := chrome.Options{Options: want, Path: "/opt/chromium", Idle: 300 * time.Millisecond, Settle: 120 * time.Millisecond, LongRequest: 1500 * time.Millisecond,
		DataWait: 7 * time.Second, CacheMaxAge: 3 * time.Minute,
		BlockTypes: []string{"image"}, Block: []string{"*/ads/*"}, KeepScripts: true,
		Allow: []chrome.Allow{{Match: "prefix", Path: "/landing/", Types: []string{"font"}, Patterns: []string{"*://cdn.test/*"}}}, RecycleAfter: 17, MaxRSS: 100 << 20,
		User: "nobody", NoSandbox: true, Nice: 19, DefaultDevice: config.DefaultDevice,
		Devices: map[string]chrome.Device{"tablet": {Width: 800, Height: 1200, Scale: 2, Mobile: true, UserAgent: "ua/1 site-renders/3"}}}
	if !reflect.DeepEqual(ch, wantChrome) {
		t.Fatalf("chrome options:\n got %+v\nwant %+v", ch, wantChrome)
	}
	noZeroField(t, "chrome.Options", reflect.ValueOf(ch))

	// render.chrome.block_third_parties, absent, adds the third parties to render.chrome.block.
	on, err := config.Parse([]byte("render:\n  renderer: chrome\n  chrome:\n    block: [\"*/ads/*\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ChromeOptions(on.Render).Block, append([]string{"*/ads/*"}, config.ChromeThirdParties()...); !reflect.DeepEqual(got, want) {
		t.Errorf("block with the third parties on: %q", got)
	}
}

// Every device a cache key may name has its emulation, resolved as config.Render.Emulation
// resolves it, and the default device is among them.
func TestChromeOptionsResolveEveryDevice(t *testing.T) {
	cfg := config.Default()
	cfg.Render.UserAgents = map[string]string{"watch": "ua-watch/1"}
	ch := ChromeOptions(cfg.Render)
	for name := range cfg.Render.DeviceNames() {
		if got, want := ch.Devices[name], chrome.Device(cfg.Render.Emulation(name)); got != want {
			t.Errorf("device %q: %+v, want %+v", name, got, want)
		}
	}
	if _, ok := ch.Devices[ch.DefaultDevice]; !ok || ch.DefaultDevice == "" {
		t.Fatalf("no default device %q in %v", ch.DefaultDevice, ch.Devices)
	}
}

func noZeroField(t *testing.T, name string, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("%s.%s is zero: a value the configuration sets does not reach it", name, v.Type().Field(i).Name)
		}
	}
}
