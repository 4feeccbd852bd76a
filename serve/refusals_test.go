package serve

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/store"
)

// tokenlessYAML is a loopback crawler listener without serve.tokens: the peer authorizes.
const tokenlessYAML = `render:
  domains: [shop.test]
serve:
  listen: 127.0.0.1:3999
routes:
  - {name: product, match: prefix, path: /p/, interval: 1h, swr: 1h}
`

// ask sends GET target with Host host ("" keeps the server's address) and the headers given
// as name, value pairs, and no token.
func (n *node) ask(t *testing.T, target, host string, headers ...string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.srv.URL, nil)
	req.URL.Opaque = target
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// Without serve.tokens, a browser's request is refused before its URL is read, naming the
// header that gave it away, and writes nothing: neither a stored page is served to it nor a
// missing one filed. The middleware's request, and one typed into the address bar, are served.
func TestTokenlessListenerRefusesBrowsers(t *testing.T) {
	n := newNode(t, tokenlessYAML)
	n.file(t, page)
	n.render(t, "desktop|"+page, "ok", 200, "<p>page</p>", nil)
	missing := "https://shop.test/p/missing"
	for _, tc := range []struct {
		name    string
		host    string
		headers []string
		code    int
		field   string
	}{
		{"a rebinding name", "attacker.example", nil, 421, "Host"},
		{"a rebinding name with a port", "attacker.example:3999", []string{"Sec-Fetch-Site", "same-origin"}, 421, "Host"},
		{"a private address", "192.168.1.2:3999", nil, 421, "Host"},
		{"a name ending in localhost", "localhost.attacker.example", nil, 421, "Host"},
		{"cross-site", "", []string{"Sec-Fetch-Site", "cross-site"}, 403, "Sec-Fetch-Site"},
		{"same-site", "", []string{"Sec-Fetch-Site", "same-site"}, 403, "Sec-Fetch-Site"},
		{"same-origin", "", []string{"Sec-Fetch-Site", "same-origin"}, 403, "Sec-Fetch-Site"},
		{"an Origin", "", []string{"Origin", "https://attacker.example"}, 403, "Origin"},
		{"a null Origin", "localhost:3999", []string{"Origin", "null"}, 403, "Origin"},
	} {
		a := n.ask(t, "/"+page, tc.host, tc.headers...)
		if a.code != tc.code || a.header.Get(HeaderCache) != "" {
			t.Errorf("%s: the stored page: %d %q, want %d naming %q", tc.name, a.code, a.body, tc.code, tc.field)
			continue
		}
		if e := errorOf(t, a); e.Field != tc.field {
			t.Errorf("%s: %+v, want %d naming %q", tc.name, e, tc.code, tc.field)
		}
		// A missing page is refused as well, unfiled (it would wait for its render otherwise:
		// only asked once the stored page was refused).
		if a := n.ask(t, "/"+missing, tc.host, tc.headers...); a.code != tc.code {
			t.Errorf("%s: a missing page: %d %q, want %d", tc.name, a.code, a.body, tc.code)
		}
		if rows := n.AllRows(); len(rows) != 1 {
			t.Fatalf("%s: %d rows, want the stored page's alone", tc.name, len(rows))
		}
	}
	// The middleware's request, in each Host it may send, and one typed into the address bar,
	// are served the stored page.
	for _, tc := range []struct {
		host    string
		headers []string
	}{
		{"", nil}, {"localhost:3999", nil}, {"LOCALHOST.", nil}, {"127.0.0.1:3999", nil}, {"127.1.2.3", nil}, {"[::1]:3999", nil},
		{"", []string{"Sec-Fetch-Site", "none", "Sec-Fetch-Mode", "navigate"}},
	} {
		if a := n.ask(t, "/"+page, tc.host, tc.headers...); a.code != 200 || a.header.Get(HeaderCache) != ResultHit {
			t.Errorf("Host %q %v: %d %q", tc.host, tc.headers, a.code, a.body)
		}
	}
}

// With serve.tokens set, the token holder's request is served whatever its Host and browser
// headers (a middleware may forward a visitor's own): a browser cannot send the token.
func TestTokenHolderIsNotCheckedForBrowsers(t *testing.T) {
	n := newNode(t, baseYAML)
	n.file(t, page)
	n.render(t, "desktop|"+page, "ok", 200, "<p>page</p>", nil)
	a := n.ask(t, "/"+page, "freshq_serve", HeaderToken, "crawl-token", "Sec-Fetch-Site", "cross-site", "Origin", "https://www.google.com")
	if a.code != 200 {
		t.Fatalf("%d %q", a.code, a.body)
	}
}

// A URL whose key is over store.MaxKeyLen is a bad request naming url, never a 503 a crawler
// would retry for ever; the longest key the store holds is rendered on miss as any other.
func TestLongKeyIsABadRequest(t *testing.T) {
	n := newNode(t, baseYAML)
	prefix := "https://shop.test/p/long?x="
	long := prefix + strings.Repeat("a", store.MaxKeyLen+1-len("desktop|")-len(prefix))
	a := n.get("/" + long)
	if e := errorOf(t, a); a.code != 400 || e.Field != "url" || a.header.Get("Retry-After") != "" {
		t.Fatalf("a %d-byte key: %d %+v Retry-After %q", store.MaxKeyLen+1, a.code, e, a.header.Get("Retry-After"))
	}
	n.nothingWritten(t, "a long key")
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"": true, "localhost": true, "localhost:3000": true, "LocalHost.:3000": true, "127.0.0.1": true, "127.0.0.1:3000": true,
		"127.9.9.9:1": true, "[::1]:3000": true, "::1": true, "[::ffff:127.0.0.1]:3000": true,
		"attacker.example": false, "attacker.example:3000": false, "localhost.attacker.example": false, "0.0.0.0:3000": false,
		"10.0.0.1": false, "[::]:3000": false, "freshq_serve": false, "127.0.0.1.nip.io": false, "[fe80::1%25lo]:3000": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
