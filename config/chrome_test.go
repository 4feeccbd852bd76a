package config

import (
	"strings"
	"testing"
)

// The chrome renderer's keys (render.chrome, render.devices) as the defaults leave them, and a
// file that sets every one of them with a value that works, pass validation.
func TestChromeDefaultsAndGoodValuesPass(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	d := Default().Render
	if d.Chrome.Path != ChromePathDefault || d.Chrome.Idle != ChromeIdleDefault || d.Chrome.LongRequest != ChromeLongRequestDefault || d.Chrome.RecycleAfter != ChromeRecycleAfterDefault ||
		d.Chrome.MaxRSS != ChromeMaxRSSDefault || d.Chrome.User != ChromeUserDefault || d.Chrome.Nice != ChromeNiceDefault || strings.Join(d.Chrome.BlockTypes, ",") != "image,media,font" {
		t.Fatalf("render.chrome defaults: %+v", d.Chrome)
	}
	c, err := Parse([]byte(`render:
  renderer: chrome
  timeout: 20s
  chrome:
    path: /usr/bin/chromium
    idle: 250ms
    long_request: 5s
    block_types: [image, media, font, stylesheet, xhr]
    block: ["*google-analytics.com*", "https://ads.test/*"]
    keep_scripts: true
    recycle_after: 1
    max_rss: 64MiB
    user: daemon
    no_sandbox: true
    nice: 19
  devices:
    tablet: {width: 800, height: 1280, scale: 2, mobile: true, user_agent: "freshq-tablet/1"}
    desktop: {width: 1920, height: 1080}
    tv.big: {width: 10000, height: 10000, scale: 10}
`))
	if err != nil {
		t.Fatalf("a good chrome configuration: %v", err)
	}
	if c.Render.Chrome.Nice != 19 {
		t.Fatalf("render.chrome.nice: %d, want 19", c.Render.Chrome.Nice)
	}
	if got := c.Render.Emulation("tablet"); got.Width != 800 || got.Scale != 2 || !got.Mobile || got.UserAgent != "freshq-tablet/1 "+UserAgentSuffixDefault {
		t.Fatalf("tablet: %+v", got)
	}
	if got := c.Render.Emulation("desktop"); got.Width != 1920 || got.Scale != 1 || got.UserAgent != UserAgentDefault {
		t.Fatalf("desktop replaced: %+v", got)
	}
	for _, name := range []string{"desktop", "mobile", "tablet", "tv.big"} {
		if !c.Render.DeviceNames()[name] {
			t.Errorf("%s is not a device name of %v", name, c.Render.DeviceNames())
		}
	}
}

// Every refusal of a render.chrome or render.devices value names its key, with the line that
// sets it, as the only problem of the file.
func TestChromeRefusalsNameTheirKeyAndLine(t *testing.T) {
	checkRefusals(t, []refusal{
		{"render:\n  chrome:\n    path: \" \"\n", "line 3: render.chrome.path"},
		{"render:\n  chrome:\n    idle: -1s\n", "line 3: render.chrome.idle"},
		{"render:\n  renderer: chrome\n  timeout: 1s\n  chrome:\n    idle: 1s\n", "line 5: render.chrome.idle"},
		{"render:\n  chrome:\n    long_request: 0s\n", "line 3: render.chrome.long_request"},
		{"render:\n  chrome:\n    block_types:\n      - image\n      - pictures\n", "line 5: render.chrome.block_types[1]"},
		{"render:\n  chrome:\n    block_types: [document]\n", "line 3: render.chrome.block_types[0]"},
		{"render:\n  chrome:\n    block: [\"ads.test/*\", \"**\"]\n", "line 3: render.chrome.block[1]"},
		{"render:\n  chrome:\n    block:\n      - \"a b\"\n", "line 4: render.chrome.block[0]"},
		{"render:\n  chrome:\n    recycle_after: -1\n", "line 3: render.chrome.recycle_after"},
		{"render:\n  chrome:\n    max_rss: 1MiB\n", "line 3: render.chrome.max_rss"},
		{"render:\n  chrome:\n    user: \" \"\n", "line 3: render.chrome.user"},
		{"render:\n  chrome:\n    nice: 20\n", "line 3: render.chrome.nice"},
		{"render:\n  chrome:\n    user: nobody\n    nice: -1\n", "line 4: render.chrome.nice"},
		{"render:\n  devices:\n    tablet: {height: 900}\n", "line 3: render.devices.tablet.width"}, // absent: the device's line
		{"render:\n  devices:\n    tablet:\n      width: 10001\n      height: 900\n", "line 4: render.devices.tablet.width"},
		{"render:\n  devices:\n    tablet:\n      width: 800\n      height: 0\n", "line 5: render.devices.tablet.height"},
		{"render:\n  devices:\n    tablet:\n      width: 800\n      height: 900\n      scale: 11\n", "line 6: render.devices.tablet.scale"},
		{"render:\n  devices:\n    tablet: {width: 800, height: 900, scale: -1}\n", "line 3: render.devices.tablet.scale"},
		{"render:\n  devices:\n    tablet:\n      width: 800\n      height: 900\n      user_agent: \"a\\nb\"\n", "line 6: render.devices.tablet.user_agent"},
		{"render:\n  devices:\n    \"tab|let\": {width: 800, height: 900}\n", "line 3: render.devices.tab|let"},
		// A name may hold dots: the line is still its own, not its section's.
		{"render:\n  devices:\n    tv: {width: 1, height: 1}\n    tv.big: {width: 0, height: 900}\n", "line 4: render.devices.tv.big.width"},
		{"render:\n  devices:\n    tv.big:\n      width: 1\n      height: 1\n    tv:\n      width: 1\n      height: -1\n", "line 8: render.devices.tv.height"},
		{"render:\n  user_agents:\n    tablet: ok/1\n    \"mob|ile\": freshq/1\n", "line 4: render.user_agents.mob|ile"},
	})
}
