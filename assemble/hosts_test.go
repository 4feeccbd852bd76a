package assemble

import (
	"reflect"
	"testing"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
)

// Every render.hosts value politeness uses reaches its limits, and the shortest pause the
// configuration lets max_pause be is the shortest pause a refusal causes.
func TestHostsLimitsCarryEveryValue(t *testing.T) {
	cfg, err := config.Parse([]byte(`
render:
  hosts: {max_concurrency: 7, overrides: {"big.test": 2}, max_pause: 3m, halve_after: 5, grow_after: 11}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := HostsLimits(cfg.Render.Hosts)
	want := hosts.Limits{MaxConcurrency: 7, Overrides: map[string]int{"big.test": 2}, MaxPause: 3 * time.Minute, HalveAfter: 5, GrowAfter: 11,
		Sites: cachekey.NewSites(nil)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("hosts limits:\n got %+v\nwant %+v", got, want)
	}
	noZeroField(t, "hosts.Limits", reflect.ValueOf(got))
	if got.Max([]byte("big.test")) != 2 || got.Max([]byte("other.test")) != 7 {
		t.Fatalf("Max: big %d, other %d", got.Max([]byte("big.test")), got.Max([]byte("other.test")))
	}
	if hosts.MinPause != config.HostsMinPause.D() {
		t.Fatalf("hosts.MinPause %s, config.HostsMinPause %s", hosts.MinPause, config.HostsMinPause)
	}
}

// Politeness is per site of render.domains: an override naming a port or a subdomain of a
// site is the site's, the lowest of several that fold into one applies, and a key's limit is
// its site's whatever port or subdomain it spells.
func TestHostsLimitsArePerSite(t *testing.T) {
	cfg, err := config.Parse([]byte(`
render:
  domains: [shop.example, "127.0.0.1"]
  hosts: {max_concurrency: 7, overrides: {"shop.example:8080": 5, "www.shop.example": 3, "127.0.0.1:9000": 2, "other.test:81": 6}}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := HostsLimits(cfg.Render.Hosts, cfg.Render.Domains...)
	if want := map[string]int{"shop.example": 3, "127.0.0.1": 2, "other.test": 6}; !reflect.DeepEqual(got.Overrides, want) {
		t.Fatalf("overrides %v, want %v", got.Overrides, want)
	}
	for key, site := range map[string]string{
		"desktop|https://shop.example/":           "shop.example",
		"desktop|http://shop.example:8080/a":      "shop.example",
		"mobile|https://a.b.shop.example:4443/x":  "shop.example",
		"desktop|http://127.0.0.1:9001/":          "127.0.0.1",
		"desktop|http://other.test:82/":           "other.test",
		"desktop|https://notshop.example/p":       "notshop.example",
		"desktop|https://xn--bcher-kva.example/p": "xn--bcher-kva.example",
	} {
		if s := string(got.Site([]byte(key))); s != site {
			t.Errorf("Site(%q) = %q, want %q", key, s, site)
		}
	}
	if n := got.Max(got.Site([]byte("desktop|http://www.shop.example:1/"))); n != 3 {
		t.Errorf("a subdomain on another port: limit %d, want the site's 3", n)
	}
	if s := got.Site([]byte("desktop|no-authority")); s != nil {
		t.Errorf("a key without a host: site %q", s)
	}
}
