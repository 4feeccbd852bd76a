package main

import (
	"testing"
	"time"
)

// The family table is the one table of User-Agent patterns, devices included: an operator's
// serve.crawlers entry that says its crawler renders as mobile gets that crawler the mobile
// page though its User-Agent carries none of the device patterns, while the shipped device
// patterns (serve.mobile_agents unset) still make Googlebot's smartphone crawler mobile and
// its desktop one desktop. Seen by the crawler: each first request is a miss rendered for its
// device, and the same URL asked for with X-Freshq-Device naming that device is a hit.
func TestEndToEndCrawlerTableSaysTheDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSiteOrigin(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, `  miss_burst: 100
  crawlers:
    - family: google
      agents: [Googlebot]
      reverse_dns: [.googlebot.com, .google.com]
    - family: other
      agents: [PhoneOnlyBot]
      device: mobile
`), "")
	waitFor(t, "ready", 60*time.Second, n.ready)

	const (
		phoneOnly      = "PhoneOnlyBot/1.0 (+https://phone.example/bot)"
		googlebotPhone = "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
		googlebotDesk  = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +http://www.google.com/bot.html) Chrome/131.0.0.0 Safari/537.36"
	)
	for i, c := range []struct{ ua, device string }{
		{phoneOnly, "mobile"},
		{googlebotPhone, "mobile"},
		{googlebotDesk, "desktop"},
	} {
		path := "/" + origin.URL + "/d/" + string(rune('a'+i))
		if a := crawl(t, serveAddr, path, "User-Agent", c.ua); a.code != 200 || a.header.Get("X-Freshq-Cache") != "miss" {
			t.Fatalf("%q: first request %d %v %.200q", c.ua, a.code, a.header, a.body)
		}
		if a := crawl(t, serveAddr, path, "User-Agent", c.ua, "X-Freshq-Device", c.device); a.code != 200 || a.header.Get("X-Freshq-Cache") != "hit" {
			t.Fatalf("%q: the %s page after its first request: %d %v, want it stored (rendered as %s)", c.ua, c.device, a.code, a.header, c.device)
		}
	}
}
