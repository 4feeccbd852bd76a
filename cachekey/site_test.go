package cachekey

import "testing"

func TestSitesOf(t *testing.T) {
	s := NewSites([]string{"Example.COM.", "shop.example.com", " bücher.example ", "127.0.0.1", "[::1]", "bad:80"})
	for _, c := range []struct{ host, want string }{
		{"example.com", "example.com"},
		{"example.com:8443", "example.com"},
		{"www.example.com", "example.com"},
		{"a.b.example.com:1", "example.com"},
		{"shop.example.com", "shop.example.com"},        // an entry of its own: the longest wins
		{"cdn.shop.example.com:81", "shop.example.com"}, // under the longer entry
		{"badexample.com", "badexample.com"},            // no suffix match across a label
		{"xn--bcher-kva.example:8080", "xn--bcher-kva.example"},
		{"www.xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"127.0.0.1:8080", "127.0.0.1"},
		{"[::1]:9", "[::1]"},
		{"[::ffff:127.0.0.1]:9", "127.0.0.1"},
		{"other.test:8080", "other.test"}, // no entry: the host without its port
		{"EXAMPLE.com.", "example.com"},   // a key stored before hosts were canonical
		{"", ""},
	} {
		if got := s.Of([]byte(c.host)); got != c.want {
			t.Errorf("Of(%q) = %q, want %q", c.host, got, c.want)
		}
	}
}

func TestSitesNilAndEmptyNameNoEntry(t *testing.T) {
	for _, s := range []*Sites{nil, NewSites(nil)} {
		if got := s.Of([]byte("www.example.com:8080")); got != "www.example.com" {
			t.Errorf("Of = %q, want the host without its port", got)
		}
	}
}

func TestSitesOfKey(t *testing.T) {
	s := NewSites([]string{"localhost"})
	a := s.OfKey(New("desktop", "http://localhost:18611/same-page"))
	b := s.OfKey(New("mobile", "http://localhost:20001/p"))
	if a != "localhost" || b != "localhost" {
		t.Fatalf("sites %q and %q, want localhost for both", a, b)
	}
	if got := s.OfKey([]byte("desktop|not a url")); got != "" {
		t.Fatalf("a key without a host: site %q", got)
	}
}

// Every spelling of one site's URLs gives one key, and so one site.
func TestSpellingsOfOneURLAreOneKeyAndOneSite(t *testing.T) {
	s := NewSites([]string{"localhost", "bücher.example"})
	for want, spellings := range map[string][]string{
		"http://localhost:18611/same-page": {"http://localhost:018611/same-page", "http://localhost:0000018611/same-page",
			"HTTP://LOCALHOST:18611/same-page", "http://localhost.:18611/same-page", "http://localhost...:018611/same-page#f"},
		"http://localhost/p":             {"http://localhost:80/p", "http://localhost:0080/p", "http://localhost:/p", "http://Localhost./p"},
		"https://xn--bcher-kva.example/": {"https://bücher.example", "https://BÜCHER.example.:443/", "https://xn--bcher-kva.example:00443"},
		"http://[::1]:8080/":             {"http://[0:0:0:0:0:0:0:1]:08080/", "http://[::1]:8080"},
	} {
		for _, sp := range spellings {
			got, err := NormalizeURL(sp)
			if err != nil || got != want {
				t.Errorf("NormalizeURL(%q) = %q, %v; want %q", sp, got, err, want)
				continue
			}
			if a, b := s.OfKey(New("desktop", got)), s.OfKey(New("desktop", want)); a != b {
				t.Errorf("%q: site %q, want %q", sp, a, b)
			}
		}
	}
}

func TestNormalizeRefusesNoPort(t *testing.T) {
	for _, bad := range []string{"http://localhost:99999/", "http://localhost:65536/", "http://localhost:0/", "http://localhost:00000/",
		"http://localhost:0000000000000000000080000/", "http://[::1]:70000/", "http://./", "http://...:80/", "http://xn--a.ä/"} {
		if got, err := NormalizeURL(bad); err == nil {
			t.Errorf("NormalizeURL(%q) = %q, accepted", bad, got)
		}
	}
	for _, ok := range []string{"http://localhost:65535/", "http://localhost:1/", "http://localhost:000001/"} {
		if _, err := NormalizeURL(ok); err != nil {
			t.Errorf("NormalizeURL(%q): %v", ok, err)
		}
	}
}

// SiteOfKey is OfKey in bytes, whatever the key: canonical keys take its path without
// allocation, anything else (an IP address, a key stored before hosts were canonical) OfKey's.
func TestSiteOfKeyIsOfKey(t *testing.T) {
	s := NewSites([]string{"example.com", "shop.example.com", "127.0.0.1", "bücher.example"})
	for _, sites := range []*Sites{s, nil} {
		for _, k := range []string{"desktop|https://www.example.com:8080/a", "desktop|https://shop.example.com/", "desktop|https://cdn.shop.example.com/",
			"desktop|http://127.0.0.1:80/", "desktop|http://[::1]:8080/", "desktop|https://notexample.com/", "desktop|https://EXAMPLE.com./x",
			"desktop|https://www.xn--bcher-kva.example/", "desktop|http://0x7f.1/", "desktop|http://123/", "desktop|https://example.com../",
			"desktop|no-authority", "desktop|https://:80/", "desktop|https://user@www.example.com:1/"} {
			if got, want := string(sites.SiteOfKey([]byte(k))), sites.OfKey([]byte(k)); got != want {
				t.Errorf("SiteOfKey(%q) = %q, OfKey %q", k, got, want)
			}
		}
	}
	key := New("desktop", "https://a.b.shop.example.com:8443/p?q=1")
	if n := testing.AllocsPerRun(100, func() { s.SiteOfKey(key) }); n != 0 {
		t.Errorf("SiteOfKey of a canonical key: %v allocations", n)
	}
}
