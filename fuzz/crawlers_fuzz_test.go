package fuzz

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/freshq/freshq/crawlers"
)

// FuzzCrawlersClientIP drives the client-address header's parser with any peer and header: it
// never panics; from an untrusted peer it is the peer whatever the header; what it takes from
// the header is an address the header holds, and one that is no trusted proxy unless every
// entry it read was one.
func FuzzCrawlersClientIP(f *testing.F) {
	for _, s := range [][2]string{
		{"127.0.0.1:1", "66.249.66.1"}, {"127.0.0.1:1", "1.2.3.4, 203.0.113.7"}, {"203.0.113.9:1", "66.249.66.1"},
		{"[::1]:1", "[2001:db8::1]:443, 10.0.0.1"}, {"127.0.0.1:1", ",,,"}, {"nonsense", "1.2.3.4"}, {"127.0.0.1:1", "127.0.0.2"},
	} {
		f.Add(s[0], s[1])
	}
	trusted := append(crawlers.LoopbackProxies(), netip.MustParsePrefix("10.0.0.0/8"))
	f.Fuzz(func(t *testing.T, peer, header string) {
		got, fromHeader := crawlers.ClientIP(peer, strings.Split(header, "\n"), trusted)
		p, _ := crawlers.ClientIP(peer, nil, trusted)
		if !fromHeader {
			if got != p {
				t.Fatalf("%q %q: %s not from the header, but not the peer %s", peer, header, got, p)
			}
			return
		}
		if !p.IsValid() || !slices.ContainsFunc(trusted, func(pr netip.Prefix) bool { return pr.Contains(p) }) {
			t.Fatalf("%q %q: %s taken from the header of an untrusted peer %s", peer, header, got, p)
		}
		if !strings.Contains(strings.ToLower(header), strings.ToLower(strings.TrimPrefix(got.String(), "::ffff:"))) &&
			!strings.Contains(header, ":") { // an IPv6 entry may be spelled otherwise
			t.Fatalf("%q %q: %s is not in the header", peer, header, got)
		}
	})
}

// FuzzCrawlersTable drives the family table's decoder with any data: it never panics; what it
// refuses matches ErrBadTable; what it accepts classifies any User-Agent into one of
// crawlers.Families or none.
func FuzzCrawlersTable(f *testing.F) {
	f.Add([]byte("families:\n  - family: google\n    agents: [Googlebot]\n    reverse_dns: [.googlebot.com]\n"), "Googlebot/2.1")
	f.Add([]byte("families:\n  - family: openai\n    agents: [GPTBot]\n    ranges: [192.0.2.0/24]\n"), "GPTBot")
	f.Add([]byte("families: [{family: nope, agents: [x]}]"), "x")
	f.Add([]byte("{"), "")
	f.Fuzz(func(t *testing.T, data []byte, ua string) {
		tab, err := crawlers.Parse(data)
		if err != nil {
			if !errors.Is(err, crawlers.ErrBadTable) {
				t.Fatalf("error %v does not match ErrBadTable", err)
			}
			return
		}
		if name := crawlers.Name(tab.Match(ua)); name != crawlers.None && !slices.Contains(crawlers.Families, name) {
			t.Fatalf("family %q is not one of the counted set", name)
		}
	})
}
