package cachekey

import (
	"errors"
	"testing"
)

func TestNewAndSplitRoundTrip(t *testing.T) {
	for _, c := range []struct{ device, url string }{
		{"desktop", "https://a.test/"},
		{"mobile", "https://a.test/c/x?q=a|b"}, // a separator inside the URL stays in the URL
		{"tv", ""},
	} {
		k := New(c.device, c.url)
		if want := c.device + Separator + c.url; string(k) != want {
			t.Fatalf("New(%q, %q) = %q, want %q", c.device, c.url, k, want)
		}
		d, u, ok := Split(k)
		if !ok || d != c.device || u != c.url {
			t.Fatalf("Split(%q) = %q %q %v", k, d, u, ok)
		}
	}
}

func TestSplitWithoutSeparatorIsAllURL(t *testing.T) {
	d, u, ok := Split([]byte("https://a.test/"))
	if ok || d != "" || u != "https://a.test/" {
		t.Fatalf("Split = %q %q %v", d, u, ok)
	}
}

func TestValidDevice(t *testing.T) {
	if err := ValidDevice("tablet"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "a|b", "|"} {
		if err := ValidDevice(bad); !errors.Is(err, ErrDevice) {
			t.Fatalf("ValidDevice(%q) = %v, want ErrDevice", bad, err)
		}
	}
}

func TestNormalizeURL(t *testing.T) {
	for raw, want := range map[string]string{
		" HTTPS://A.Test ":      "https://a.test/",
		"http://a.test/x#frag":  "http://a.test/x",
		"https://a.test/p?q=1":  "https://a.test/p?q=1",
		"https://A.test/Case/X": "https://a.test/Case/X",
	} {
		if got, err := NormalizeURL(raw); err != nil || got != want {
			t.Fatalf("NormalizeURL(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, bad := range []string{"", "a.test/x", "ftp://a.test/", "https://u:p@a.test/", "mailto:x@a.test", "https:///x"} {
		if _, err := NormalizeURL(bad); err == nil {
			t.Fatalf("NormalizeURL(%q) accepted", bad)
		}
	}
}

func TestHost(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"desktop|https://shop.example/p/1?a=b", "shop.example"},
		{"mobile|http://127.0.0.1:8080/x", "127.0.0.1:8080"},
		{"desktop|https://user:pw@shop.example:8443?q", "shop.example:8443"},
		{"desktop|https://[::1]:9/a", "[::1]:9"},
		{"https://nodevice.example#f", "nodevice.example"},
		{"desktop|not a url", ""},
	} {
		if got := string(Host([]byte(c.key))); got != c.want {
			t.Errorf("Host(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}
