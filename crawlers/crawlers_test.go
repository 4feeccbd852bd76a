package crawlers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/testkit/testdns"
)

func TestFamiliesAreTheCountedSet(t *testing.T) {
	if len(Families) != len12 || len(Verdicts) != len6 {
		t.Fatalf("Tally's cells are %d×%d, the sets %d×%d", len12, len6, len(Families), len(Verdicts))
	}
	var names []string
	for _, s := range DefaultSpecs() {
		names = append(names, s.Family)
	}
	if !slices.Equal(names, Families) {
		t.Fatalf("the shipped table's families %v, want every one of %v in order", names, Families)
	}
}

// The shipped table classifies the crawlers that come, the AI crawlers among them, by the
// User-Agents they document, and a browser as none.
func TestDefaultTableClassifies(t *testing.T) {
	tab := Default()
	for ua, want := range map[string]string{
		"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)": Google,
		"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)":                                                                                                   Bing,
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)": Apple,
		"Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)":                                                                                                          Yandex,
		"Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)":                                                                                       Baidu,
		"DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)":                                                                                                                DuckDuckGo,
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.1; +https://openai.com/gptbot)":                                                                    OpenAI,
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot":                                                                 OpenAI,
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot":                                                          OpenAI,
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)":                                                                   Anthropic,
		"Claude-User/1.0": Anthropic,
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)": Perplexity,
		"Perplexity-User/1.0":                      Perplexity,
		"CCBot/2.0 (https://commoncrawl.org/faq/)": CommonCrawl,
		"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)": Social,
		"Twitterbot/1.0": Social,
		"Mozilla/5.0 (compatible; SomeNewBot/1.0)":      Other,
		"Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0": None,
		"": None,
	} {
		if got := Name(tab.Match(ua)); got != want {
			t.Errorf("%q: family %s, want %s", ua, got, want)
		}
	}
	for _, name := range []string{Google, Bing, Apple, Yandex, Baidu} {
		if f := familyOf(tab, name); !f.Verifiable() {
			t.Errorf("%s is not verifiable in the shipped table", name)
		}
	}
	for _, name := range []string{DuckDuckGo, OpenAI, Anthropic, Perplexity, CommonCrawl, Social, Other} {
		if f := familyOf(tab, name); f.Verifiable() {
			t.Errorf("%s is verifiable in the shipped table, which ships no ranges", name)
		}
	}
}

// The shipped table says the device as the crawler listener said it before the device
// patterns joined it (serve.mobile_agents' former default, Mobile, Android, iPhone): the
// smartphone crawlers render as mobile, the rest say nothing (desktop); a family that names a
// device renders as it whatever its User-Agent carries.
func TestTableSaysTheDevice(t *testing.T) {
	tab := Default()
	for ua, want := range map[string]string{
		"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)":     "mobile",
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +http://www.google.com/bot.html) Chrome/120.0 Safari/537.36":                                                           "",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 7_0 like Mac OS X) AppleWebKit/537.51.1 (KHTML, like Gecko) Version/7.0 Mobile/11A465 Safari/9537.53 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)": "mobile",
		"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)":                                                                                                                             "",
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.1; +https://openai.com/gptbot)":                                                                                              "",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Safari/604.1":                                                                                                                                 "mobile", // no crawler: as before
		"": "",
	} {
		if got := tab.Device(tab.Match(ua), ua); got != want {
			t.Errorf("%q: device %q, want %q", ua, got, want)
		}
	}
	own, err := New([]Spec{{Family: Other, Agents: []string{"PhoneOnlyBot"}, Device: "mobile"}, {Family: OpenAI, Agents: []string{"GPTBot"}, Device: "desktop"}},
		DefaultDevices()...)
	if err != nil {
		t.Fatal(err)
	}
	for ua, want := range map[string]string{"PhoneOnlyBot/1.0": "mobile", "Mozilla/5.0 (Linux; Android 14) Mobile GPTBot/1.1": "desktop", "Mozilla/5.0 (iPhone) SomeBot": "mobile"} {
		if got := own.Device(own.Match(ua), ua); got != want {
			t.Errorf("a family that names its device, %q: %q, want %q", ua, got, want)
		}
	}
	var none *Table
	if got := none.Device(nil, "iPhone"); got != "" {
		t.Errorf("no table: %q", got)
	}
}

func familyOf(t *Table, name string) *Family {
	for _, f := range t.families {
		if f.name == name {
			return f
		}
	}
	return nil
}

func TestNewRefuses(t *testing.T) {
	for name, specs := range map[string][]Spec{
		"unknown family": {{Family: "mybot", Agents: []string{"x"}}},
		"twice":          {{Family: Google, Agents: []string{"a"}}, {Family: Google, Agents: []string{"b"}}},
		"no agents":      {{Family: Google}},
		"blank agent":    {{Family: Google, Agents: []string{" "}}},
		"tld suffix":     {{Family: Google, Agents: []string{"g"}, ReverseDNS: []string{".com"}}},
		"bad suffix":     {{Family: Google, Agents: []string{"g"}, ReverseDNS: []string{"goo gle.com"}}},
		"bad range":      {{Family: OpenAI, Agents: []string{"g"}, Ranges: []string{"1.2.3.4"}}},
	} {
		if _, err := New(specs); !errors.Is(err, ErrBadTable) {
			t.Errorf("%s: %v, want ErrBadTable", name, err)
		}
	}
	for name, devices := range map[string][]DeviceSpec{
		"no device name":    {{Agents: []string{"Mobile"}}},
		"a key's separator": {{Device: "mo|bile", Agents: []string{"Mobile"}}},
		"blank agent":       {{Device: "mobile", Agents: []string{""}}},
		"long agent":        {{Device: "mobile", Agents: []string{strings.Repeat("m", MaxPattern+1)}}},
	} {
		if _, err := New(nil, devices...); !errors.Is(err, ErrBadTable) {
			t.Errorf("%s: %v, want ErrBadTable", name, err)
		}
	}
	if _, err := New([]Spec{{Family: Google, Agents: []string{"g"}, Device: "pho ne"}}); !errors.Is(err, ErrBadTable) {
		t.Errorf("a family's device with a blank: %v, want ErrBadTable", err)
	}
	if _, err := Parse([]byte("families:\n  - family: google\n    agent: [x]\n")); !errors.Is(err, ErrBadTable) {
		t.Errorf("an unknown key: %v", err)
	}
}

func TestClientIP(t *testing.T) {
	lo := LoopbackProxies()
	lan := append(LoopbackProxies(), netip.MustParsePrefix("10.0.0.0/8"))
	for _, c := range []struct {
		name    string
		peer    string
		values  []string
		trusted []netip.Prefix
		want    string
		header  bool
	}{
		{"no header", "127.0.0.1:5000", nil, lo, "127.0.0.1", false},
		{"single value from a trusted peer", "127.0.0.1:5000", []string{"66.249.66.1"}, lo, "66.249.66.1", true},
		{"untrusted peer's header ignored", "203.0.113.9:5000", []string{"66.249.66.1"}, lo, "203.0.113.9", false},
		{"the right-most, not the forged left-most", "127.0.0.1:1", []string{"66.249.66.1, 203.0.113.7"}, lo, "203.0.113.7", true},
		{"trusted hops skipped", "127.0.0.1:1", []string{"66.249.66.1, 203.0.113.7, 10.1.2.3"}, lan, "203.0.113.7", true},
		{"across lines", "127.0.0.1:1", []string{"66.249.66.1", "203.0.113.7, 10.1.2.3"}, lan, "203.0.113.7", true},
		{"garbage stops the walk", "127.0.0.1:1", []string{"66.249.66.1, nonsense, 10.1.2.3"}, lan, "10.1.2.3", true},
		{"garbage alone is the peer", "127.0.0.1:1", []string{"nonsense"}, lo, "127.0.0.1", false},
		{"all trusted: the left-most", "127.0.0.1:1", []string{"10.0.0.1, 10.0.0.2"}, lan, "10.0.0.1", true},
		{"ports and brackets", "[::1]:1", []string{"[2001:db8::1]:443"}, lo, "2001:db8::1", true},
		{"mapped v4", "[::ffff:127.0.0.1]:1", []string{"::ffff:66.249.66.1"}, lo, "66.249.66.1", true},
	} {
		got, header := ClientIP(c.peer, c.values, c.trusted)
		if got.String() != c.want || header != c.header {
			t.Errorf("%s: %s (from the header %v), want %s (%v)", c.name, got, header, c.want, c.header)
		}
	}
	many := strings.Repeat("10.0.0.1,", 10_000) + "10.0.0.2"
	if got, _ := ClientIP("127.0.0.1:1", []string{many}, lan); got.String() != "10.0.0.1" {
		t.Errorf("a header of 10,001 trusted hops: %s, want the last read of the first %d", got, maxHops)
	}
}

var (
	googleAddr = netip.MustParseAddr("66.249.66.1")
	fakeAddr   = netip.MustParseAddr("203.0.113.7")
	liarAddr   = netip.MustParseAddr("203.0.113.8")
	hangAddr   = netip.MustParseAddr("203.0.113.9")
)

func zone() *testdns.Zone {
	return &testdns.Zone{
		Addrs: map[string][]netip.Addr{"crawl-66-249-66-1.googlebot.com": {googleAddr}, "crawl-203-0-113-8.googlebot.com": {googleAddr}},
		Names: map[netip.Addr][]string{googleAddr: {"crawl-66-249-66-1.googlebot.com."}, fakeAddr: {"host.example.net."},
			liarAddr: {"crawl-203-0-113-8.googlebot.com."}}, // a PTR its owner wrote, which does not resolve back
		Hang: map[netip.Addr]bool{hangAddr: true},
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestVerify(t *testing.T) {
	z := zone()
	res := testdns.Resolver(testdns.Listen(t, z))
	clk := &clock{t: time.Unix(1_000_000, 0)}
	v := NewVerifier(res, Options{Timeout: 300 * time.Millisecond, Concurrency: 4, CacheEntries: 100, CacheTTL: time.Hour}, clk.now)
	tab := Default()
	google, gpt := tab.Match("Googlebot/2.1"), tab.Match("GPTBot/1.1")
	ctx := context.Background()
	for _, c := range []struct {
		name string
		f    *Family
		addr netip.Addr
		want string
	}{
		{"a reverse name of Google's, confirmed forward", google, googleAddr, Verified},
		{"a reverse name not Google's", google, fakeAddr, Unverified},
		{"Google's name in a PTR that does not resolve back", google, liarAddr, Unverified},
		{"no reverse name", google, netip.MustParseAddr("198.51.100.1"), Unverified},
		{"a family without verification", gpt, fakeAddr, Unverifiable},
		{"not a crawler", nil, fakeAddr, NotACrawler},
		{"no address", google, netip.Addr{}, Unchecked},
	} {
		if got := v.Verify(ctx, c.f, c.addr); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	// Cached: a second ask reads no DNS, until the TTL passes.
	q := z.Queries()
	if got := v.Verify(ctx, google, googleAddr); got != Verified || z.Queries() != q {
		t.Fatalf("a cached verdict: %s after %d more queries", got, z.Queries()-q)
	}
	clk.add(time.Hour)
	if v.Verify(ctx, google, googleAddr); z.Queries() == q {
		t.Fatal("a verdict past its TTL was not asked again")
	}
	// Published ranges verify without DNS.
	ranged, err := New([]Spec{{Family: OpenAI, Agents: []string{"GPTBot"}, Ranges: []string{"203.0.113.0/28"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Verify(ctx, ranged.Match("GPTBot"), fakeAddr); got != Verified {
		t.Fatalf("an address in the family's ranges: %s", got)
	}
	if got := v.Verify(ctx, ranged.Match("GPTBot"), netip.MustParseAddr("198.51.100.1")); got != Unverified {
		t.Fatalf("an address outside the family's ranges: %s", got)
	}
}

// A lookup that does not answer is Unverified at its timeout: Verify returns while the server
// still holds the query. A second address finds the only lookup slot taken and waits no
// longer than its own timeout for it.
func TestVerifyHangingLookup(t *testing.T) {
	z := zone()
	res := testdns.Resolver(testdns.Listen(t, z))
	v := NewVerifier(res, Options{Timeout: 200 * time.Millisecond, Concurrency: 1, CacheEntries: 10, CacheTTL: time.Hour}, nil)
	google := Default().Match("Googlebot")
	done := make(chan string, 2)
	go func() { done <- v.Verify(context.Background(), google, hangAddr) }()
	go func() { done <- v.Verify(context.Background(), google, hangAddr.Next()) }()
	for range 2 {
		if got := <-done; got != Unverified {
			t.Fatalf("a lookup that hangs: %s, want unverified", got)
		}
	}
	select {
	case <-z.Released():
		t.Fatal("the held query was released before the verdicts came")
	default:
	}
}

// Known never waits: with the address's reverse lookup held by the server, it answers Pending
// and leaves one lookup running in the background, which a second Known does not start again
// and Verify waits for instead of asking DNS itself; once the server answers, the verdict is
// cached for Known. With every lookup slot taken, Known starts nothing (no_slot).
func TestKnownStartsOneLookupInTheBackground(t *testing.T) {
	z := zone()
	slow := netip.MustParseAddr("66.249.66.3")
	z.Addrs["crawl-66-249-66-3.googlebot.com"] = []netip.Addr{slow}
	z.Names[slow] = []string{"crawl-66-249-66-3.googlebot.com."}
	z.Hang[slow] = true
	res := testdns.Resolver(testdns.Listen(t, z))
	v := NewVerifier(res, Options{Timeout: time.Minute, Concurrency: 1, CacheEntries: 10, CacheTTL: time.Hour}, nil)
	google := Default().Match("Googlebot")
	if got := v.Known(google, slow); got != Pending {
		t.Fatalf("Known with the lookup held: %s, want pending", got)
	}
	waitUntil(t, "the background lookup's query held", func() bool { return z.Held() == 1 })
	q := z.Queries()
	if got := v.Known(google, slow); got != Pending || z.Queries() != q {
		t.Fatalf("Known again while its lookup runs: %s after %d more queries, want pending and none", got, z.Queries()-q)
	}
	// The only slot is the running lookup's: another address's lookup is not started.
	if got := v.Known(google, fakeAddr); got != Pending || v.Lookups()["no_slot"] != 1 {
		t.Fatalf("Known with no slot free: %s, lookups %v", got, v.Lookups())
	}
	done := make(chan string, 1)
	go func() { done <- v.Verify(context.Background(), google, slow) }()
	select {
	case got := <-done:
		t.Fatalf("Verify answered %s while the lookup it waits for is held", got)
	default:
	}
	z.Release()
	if got := <-done; got != Verified {
		t.Fatalf("Verify, waiting for the background lookup: %s", got)
	}
	if got := v.Known(google, slow); got != Verified {
		t.Fatalf("Known once the lookup answered: %s, want the cached verdict", got)
	}
	if got := v.Lookups(); got["answered"] != 1 {
		t.Fatalf("lookups %v: want the one background lookup answered", got)
	}
	if got := z.Queries(); got != q+2 { // the forward confirmation of the name: A and AAAA
		t.Fatalf("%d queries since the held one, want the forward ones alone (A, AAAA): no second reverse lookup", got-q)
	}
}

// waitUntil polls cond until it holds, failing after a deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// However many addresses claim a crawler, the cache holds at most CacheEntries verdicts.
func TestVerifyCacheBounded(t *testing.T) {
	z := zone()
	res := testdns.Resolver(testdns.Listen(t, z))
	v := NewVerifier(res, Options{Timeout: time.Second, Concurrency: 8, CacheEntries: 50, CacheTTL: time.Hour}, nil)
	google := Default().Match("Googlebot")
	var wg sync.WaitGroup
	for i := range 500 {
		wg.Go(func() {
			v.Verify(context.Background(), google, netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}))
		})
	}
	wg.Wait()
	if n := v.Len(); n != 50 {
		t.Fatalf("the cache holds %d verdicts after 500 addresses, want its bound 50", n)
	}
}

func TestTallyBounded(t *testing.T) {
	var tl Tally
	tab := Default()
	for i := range 10_000 {
		ua := fmt.Sprintf("Mozilla/5.0 (compatible; Bot%d/1.0) %x", i, i*7919)
		tl.Note(Name(tab.Match(ua)), Verdicts[i%len(Verdicts)], GotHit)
		tl.Note(fmt.Sprintf("family%d", i), Verified, GotStale) // never counted
	}
	tl.Note(Google, Verified, GotHit)
	tl.Note(Google, Verified, GotStale)
	rows := tl.Rows()
	if len(rows) > len(Families)*len(Verdicts) {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		if r.Family == Google && (r.Requests != 2 || r.StaleShare != 0.5) {
			t.Fatalf("google: %+v", r)
		}
	}
}
