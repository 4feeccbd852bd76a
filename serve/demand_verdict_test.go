package serve

import (
	"testing"

	"github.com/freshq/freshq/crawlers"
)

const (
	browserUA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
	gptbotUA  = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"
)

// With verification on, a page's demand counts only requests whose claim was verified: a
// "Googlebot" from an address Google's DNS does not confirm, sending many requests, moves none
// (neither while its first lookup is pending nor once it is unverified), and neither do the same
// requests without a crawler's User-Agent or with one of a family that documents no
// verification (anyone can write either). The verified Googlebot's requests do count, once its
// address's verdict is known. On the miss path, a page a request without a crawler's claim
// had rendered is stored, not counted.
func TestDemandCountsOnlyVerifiedClaims(t *testing.T) {
	n, _ := verifyingNode(t)
	n.file(t, page)
	n.render(t, "desktop|"+page, "ok", 200, "<html>stored</html>", nil)
	key := []byte("desktop|" + page)
	google := n.h.d.Settings().Crawlers.Match(googlebot)
	// The impostor's first request: answered pending, its lookup started in the background.
	n.get("/"+page, "User-Agent", googlebot, "X-Forwarded-For", impostorIP.String())
	waitFor(t, "the impostor's lookup", func() bool { return n.h.d.Verifier.Known(google, impostorIP) == crawlers.Unverified })
	for _, spoof := range []struct{ what, ua, from string }{
		{"an unverified Googlebot", googlebot, impostorIP.String()},
		{"a request claiming no crawler", browserUA, impostorIP.String()},
		{"a claimed GPTBot (no verification documented)", gptbotUA, impostorIP.String()},
	} {
		for i := range 40 {
			if a := n.get("/"+page, "User-Agent", spoof.ua, "X-Forwarded-For", spoof.from); a.code != 200 {
				t.Fatalf("%s, request %d: %d %q", spoof.what, i, a.code, a.body)
			}
		}
		if c := n.h.Demand().Count(key, n.Now()); c != 0 {
			t.Fatalf("%s sent 40 requests: the page's demand is %v, want 0", spoof.what, c)
		}
	}

	// The verified Googlebot: its first request is answered pending (not counted), the lookup
	// it starts confirms the address, and each request from then on counts.
	n.get("/"+page, "User-Agent", googlebot, "X-Forwarded-For", googleIP.String())
	waitFor(t, "the verified address's lookup", func() bool { return n.h.d.Verifier.Known(google, googleIP) == crawlers.Verified })
	for range 10 {
		n.get("/"+page, "User-Agent", googlebot, "X-Forwarded-For", googleIP.String())
	}
	if c := n.h.Demand().Count(key, n.Now()); c != 10 {
		t.Fatalf("10 requests of a verified Googlebot: the page's demand is %v, want 10", c)
	}

	// The miss path: rendered for a request claiming no crawler (it gets a render on miss as
	// before), stored, and not counted.
	other := "https://shop.test/p/other"
	ch := n.async("/"+other, "User-Agent", browserUA, "X-Forwarded-For", impostorIP.String())
	n.until(t, 1)
	n.render(t, "desktop|"+other, "ok", 200, "<p>rendered</p>", nil)
	if a := <-ch; a.code != 200 || a.header.Get(HeaderCache) != "miss" {
		t.Fatalf("a miss claiming no crawler: %d %v %q", a.code, a.header, a.body)
	}
	if c := n.h.Demand().Count([]byte("desktop|"+other), n.Now()); c != 0 {
		t.Fatalf("a miss claiming no crawler: the page's demand is %v, want 0", c)
	}
}

// With verification off (no client address header, serve.verify_crawlers left to its
// default), the operator trusts its middleware: every request of a stored page counts, a
// claimed crawler's or not, on the hit path and the miss path.
func TestDemandCountsEveryRequestWithVerificationOff(t *testing.T) {
	n := newNode(t, baseYAML)
	if n.h.d.Settings().Verify {
		t.Fatal("baseYAML verifies crawlers: want verification off")
	}
	ch := n.async("/"+page, "User-Agent", googlebot)
	n.until(t, 1)
	n.render(t, "desktop|"+page, "ok", 200, "<html>stored</html>", nil)
	if a := <-ch; a.code != 200 || a.header.Get(HeaderCache) != "miss" {
		t.Fatalf("a miss: %d %v %q", a.code, a.header, a.body)
	}
	for _, ua := range []string{googlebot, browserUA, gptbotUA} {
		for range 5 {
			n.get("/"+page, "User-Agent", ua)
		}
	}
	if c := n.h.Demand().Count([]byte("desktop|"+page), n.Now()); c != 16 {
		t.Fatalf("a miss and 15 hits with verification off: the page's demand is %v, want 16", c)
	}
}
