package render

import "testing"

func TestAllowed(t *testing.T) {
	list := []string{"example.com", "Shop.Example.ORG.", "bücher.example", "10.0.0.1", "::1", "", "https://bad.example/"}
	for _, tc := range []struct {
		domains []string
		host    string
		want    bool
	}{
		{nil, "anything.example", true},
		{[]string{}, "10.9.8.7:80", true},
		{list, "example.com", true},
		{list, "www.example.com", true},
		{list, "a.b.example.com", true},
		{list, "EXAMPLE.COM", true},
		{list, "example.com.", true},
		{list, "example.com:8443", true},
		{list, "badexample.com", false},
		{list, "example.com.evil.net", false},
		{list, "com", false},
		{list, "example.org", false}, // the entry is shop.example.org: its parent is not allowed
		{list, "shop.example.org", true},
		{list, "cdn.shop.example.org:443", true},
		{list, "bücher.example", true},
		{list, "www.BÜCHER.example", true}, // case-folded before the IDNA conversion
		{list, "xn--bcher-kva.example", true},
		{list, "www.xn--bcher-kva.example", true},
		{list, "bucher.example", false},
		{list, "10.0.0.1", true},
		{list, "10.0.0.1:8080", true},
		{list, "1.10.0.0.1", false}, // an IP entry is never a suffix
		{list, "10.0.0.2", false},
		{list, "[::1]:8420", true},
		{list, "::1", true},
		{list, "[0:0:0:0:0:0:0:1]", true},
		{list, "[::2]", false},
		{list, "", false},
		{list, ".", false},
		{list, "bad.example", false},               // the entry with a scheme is unusable and skipped
		{[]string{"", "  "}, "example.com", false}, // a non-empty list of unusable entries fails closed
		{[]string{"example.com"}, "a..example.com", false},
		{[]string{"localhost"}, "localhost:8080", true},
		{[]string{"::ffff:10.0.0.1"}, "10.0.0.1", true}, // v4-mapped is the v4 address
	} {
		if got := Allowed(tc.domains, tc.host); got != tc.want {
			t.Errorf("Allowed(%q, %q) = %v, want %v", tc.domains, tc.host, got, tc.want)
		}
	}
}

func TestStripPort(t *testing.T) {
	for in, want := range map[string]string{
		"example.com": "example.com", "example.com:80": "example.com", "[::1]:80": "::1", "[::1]": "::1",
		"::1": "::1", "fe80::1": "fe80::1", "10.0.0.1:9": "10.0.0.1", "[broken": "[broken",
	} {
		if got := stripPort(in); got != want {
			t.Errorf("stripPort(%q) = %q, want %q", in, got, want)
		}
	}
}
