package config

import (
	"testing"
	"time"
)

// render.chrome.data_wait and cache_max_age: their defaults, a file's values, a cache_max_age
// of 0 kept as written (no bound by age), and refusals naming the key and its line.
func TestChromeDataWaitAndCacheMaxAge(t *testing.T) {
	d := Default().Render.Chrome
	if d.DataWait != ChromeDataWaitDefault || d.DataWait.D() != 10*time.Second || d.CacheMaxAge != ChromeCacheMaxAgeDefault || d.CacheMaxAge.D() != 10*time.Minute {
		t.Fatalf("defaults: data_wait %s cache_max_age %s", d.DataWait, d.CacheMaxAge)
	}
	c, err := Parse([]byte("render:\n  chrome:\n    data_wait: 4s\n    cache_max_age: 1h\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Render.Chrome.DataWait.D() != 4*time.Second || c.Render.Chrome.CacheMaxAge.D() != time.Hour {
		t.Fatalf("set: %+v", c.Render.Chrome)
	}
	c, err = Parse([]byte("render:\n  chrome:\n    cache_max_age: 0s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Render.Chrome.CacheMaxAge != 0 {
		t.Fatalf("cache_max_age: 0s became %s; it is no bound, as written", c.Render.Chrome.CacheMaxAge)
	}
	checkRefusals(t, []refusal{
		{"render:\n  chrome:\n    data_wait: 0s\n", "line 3: render.chrome.data_wait"},
		{"render:\n  chrome:\n    idle: 1s\n    data_wait: -1s\n", "line 4: render.chrome.data_wait"},
		{"render:\n  chrome:\n    cache_max_age: -1m\n", "line 3: render.chrome.cache_max_age"},
	})
}
