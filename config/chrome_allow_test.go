package config

import "testing"

// render.chrome.settle above render.chrome.idle, and a render.chrome.allow entry with a bad
// match, no path or a load that is neither a resource type nor a pattern, are refused, naming
// their key and line, as the only problem of the file.
func TestChromeSettleAndAllowRefusals(t *testing.T) {
	checkRefusals(t, []refusal{
		{"render:\n  chrome:\n    idle: 200ms\n    settle: 300ms\n", "line 4: render.chrome.settle"},
		{"render:\n  chrome:\n    settle: -1s\n", "line 3: render.chrome.settle"},
		{"render:\n  chrome:\n    allow:\n      - {match: regex, path: /a/, load: [font]}\n", "render.chrome.allow[0].match"},
		{"render:\n  chrome:\n    allow:\n      - {match: prefix, load: [font]}\n", "render.chrome.allow[0].path"},
		{"render:\n  chrome:\n    allow:\n      - {match: prefix, path: /a/, load: [font, \"**\"]}\n", "render.chrome.allow[0].load[1]"},
	})
}

// A configured idle below the default settle makes the settle the idle: a file that only
// shortens idle stays valid.
func TestChromeSettleFollowsAShortIdle(t *testing.T) {
	c, err := Parse([]byte("render:\n  chrome:\n    idle: 100ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Render.Chrome.Settle.D() != c.Render.Chrome.Idle.D() {
		t.Errorf("settle %s with idle %s", c.Render.Chrome.Settle, c.Render.Chrome.Idle)
	}
}
