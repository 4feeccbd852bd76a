package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/store"
)

// getPage fetches /v1/pages for u.
func (n *opNode) getPage(u string) (int, http.Header, []byte) {
	n.T.Helper()
	resp, err := http.Get(n.srv.URL + "/v1/pages?url=" + url.QueryEscape(u))
	if err != nil {
		n.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// storePage writes a page for u as it is, bypassing every check a result goes through: a page
// stored by an older version, or by a bug, must still be answered without a panic.
func (n *opNode) storePage(u string, pg store.Page) {
	n.T.Helper()
	key := []byte("desktop|" + u)
	sch, err := store.NewSchedule(key, n.Now()+3600_000, false, 0, store.Lanes{})
	if err != nil {
		n.T.Fatal(err)
	}
	if err := n.Store.WriteSchedules([]store.Write{{Schedule: sch, Page: &pg}}); err != nil {
		n.T.Fatal(err)
	}
}

// A stored page is served as a document that runs no script and is never sniffed into one, and
// the page's own headers cannot loosen that.
func TestPagesCarryNoScriptHeaders(t *testing.T) {
	n := newOpNode(t)
	const u = "https://shop.test/c/a"
	n.storePage(u, store.Page{Status: 200, RenderedAtMs: n.Now(), Body: []byte("<script>alert(1)</script>"), Headers: []store.Header{
		{Name: "content-type", Value: "text/html"},
		{Name: "content-security-policy", Value: "script-src *"},
		{Name: "x-content-type-options", Value: "sniff"},
	}})
	code, h, body := n.getPage(u)
	if code != 200 || string(body) != "<script>alert(1)</script>" || h.Get("Content-Type") != "text/html" {
		t.Fatalf("%d %v %q", code, h, body)
	}
	if got := h.Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", got)
	}
	if got := h.Values("Content-Security-Policy"); len(got) != 1 || got[0] != PageCSP {
		t.Errorf("Content-Security-Policy %q", got)
	}
	// The directives that keep a stored page from running script, read from the header served.
	csp := map[string]string{}
	for _, d := range strings.Split(h.Get("Content-Security-Policy"), ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		csp[name] = value
	}
	if v, ok := csp["sandbox"]; !ok || v != "" {
		t.Errorf("sandbox %q (present %v): want a bare sandbox, no allow-* token", v, ok)
	}
	if csp["default-src"] != "'none'" {
		t.Errorf("default-src %q, want 'none'", csp["default-src"])
	}
	for _, name := range []string{"script-src", "script-src-elem", "script-src-attr", "worker-src", "object-src", "child-src", "frame-src"} {
		if _, ok := csp[name]; ok {
			t.Errorf("%s is set (%q): it would loosen default-src 'none'", name, csp[name])
		}
	}
	if csp["frame-ancestors"] != "'none'" || csp["base-uri"] != "'none'" || csp["form-action"] != "'none'" {
		t.Errorf("frame-ancestors %q, base-uri %q, form-action %q: want 'none'", csp["frame-ancestors"], csp["base-uri"], csp["form-action"])
	}
}

// A stored status that HTTP cannot carry as a final answer is a 502 with a JSON error, not a
// panic in WriteHeader (status 0 is what the exec renderer once stored).
func TestPagesWithAnInvalidStoredStatus(t *testing.T) {
	n := newOpNode(t)
	for _, status := range []uint16{0, 1, 99, 100, 103, 199, 600, 999, 65535} {
		u := "https://shop.test/c/s" + strings.Repeat("x", int(status%7))
		n.storePage(u, store.Page{Status: status, RenderedAtMs: n.Now(), Body: []byte("<html>x</html>")})
		code, h, body := n.getPage(u)
		var e struct{ Error, Field string }
		if code != http.StatusBadGateway || json.Unmarshal(body, &e) != nil || e.Field != "" || !strings.Contains(e.Error, "status") ||
			!strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("stored status %d: %d %q", status, code, body)
		}
	}
	for _, status := range []uint16{200, 203, 299, 404, 503, 599} {
		u := "https://shop.test/c/ok"
		n.storePage(u, store.Page{Status: status, RenderedAtMs: n.Now(), Body: []byte("<html>x</html>")})
		if code, _, _ := n.getPage(u); code != int(status) {
			t.Errorf("stored status %d served as %d", status, code)
		}
	}
}

// A page stored gzipped is answered decoded, without its content-encoding: the admin listener
// is read by an operator's browser and freshqctl, whatever they accept. One that does not
// decompress is a 502, not a body sent as if it were the page.
func TestPagesStoredGzippedAreAnsweredDecoded(t *testing.T) {
	n := newOpNode(t)
	const u, bad = "https://shop.test/c/gz", "https://shop.test/c/bad"
	html := []byte("<html>" + strings.Repeat("<p>a product</p>", 200) + "</html>")
	body, headers := intake.CompressPage(html, []store.Header{{Name: "content-type", Value: "text/html"}})
	n.storePage(u, store.Page{Status: 200, RenderedAtMs: n.Now(), Body: body, Headers: headers})
	req, _ := http.NewRequest(http.MethodGet, n.srv.URL+"/v1/pages?url="+url.QueryEscape(u), nil)
	req.Header.Set("Accept-Encoding", "gzip") // even so: the transport then leaves the body as sent
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != string(html) || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("%d, Content-Encoding %q, %d bytes: want the page decoded", resp.StatusCode, resp.Header.Get("Content-Encoding"), len(got))
	}
	n.storePage(bad, store.Page{Status: 200, RenderedAtMs: n.Now(), Body: []byte("not gzip"), Headers: headers})
	if code, _, b := n.getPage(bad); code != http.StatusBadGateway {
		t.Fatalf("a gzipped body that does not decompress: %d %q, want 502", code, b)
	}
}
