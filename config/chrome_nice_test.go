package config

import "testing"

// render.chrome.nice absent is ChromeNiceDefault; 0 written is kept (the browser at the worker's
// own priority), not replaced by the default.
func TestChromeNiceZeroIsKeptAbsentIsTheDefault(t *testing.T) {
	c, err := Parse([]byte("render:\n  renderer: chrome\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Render.Chrome.Nice != ChromeNiceDefault {
		t.Fatalf("absent render.chrome.nice is %d, want %d", c.Render.Chrome.Nice, ChromeNiceDefault)
	}
	c, err = Parse([]byte("render:\n  renderer: chrome\n  chrome:\n    nice: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Render.Chrome.Nice != 0 {
		t.Fatalf("render.chrome.nice: 0 became %d; it is the worker's own priority, as written", c.Render.Chrome.Nice)
	}
}
