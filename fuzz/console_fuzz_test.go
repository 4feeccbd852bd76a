package fuzz

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/console"
	"github.com/freshq/freshq/wire"
)

// consoleAPI answers the console's reads with fixed views and counts the calls that change
// something.
type consoleAPI struct{ changes atomic.Int64 }

func (a *consoleAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	w.Header().Set("Content-Type", "application/json")
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/queue":
		json.NewEncoder(w).Encode(wire.QueueView{Backlog: map[string]uint64{"cold": 1}, Capacity: &wire.Capacity{}})
	case "GET /v1/targets":
		json.NewEncoder(w).Encode(wire.Explanation{URL: r.URL.Query().Get("url"), Device: r.URL.Query().Get("device")})
	case "GET /v1/targets/list":
		// The prefix and the cursor come back as a page's URL and the next cursor: whatever
		// bytes they hold land in the list's text and links.
		q := r.URL.Query()
		json.NewEncoder(w).Encode(wire.PageList{Prefix: q.Get("prefix"), Next: q.Get("after") + "|x",
			Pages: []wire.PageEntry{{URL: q.Get("prefix"), Device: q.Get("device")}}})
	case "GET /v1/targets/crawlers":
		io.WriteString(w, `{"tracked":true,"since_ms":1,"families":[{"family":"google","requests":3,"hit":3,"last_ms":2},{"family":"bing","requests":0}]}`)
	case "GET /v1/pages":
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<p>page</p>")
	case "POST /v1/prioritize", "POST /recache", "DELETE /v1/targets":
		a.changes.Add(1)
		io.WriteString(w, "{}")
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":"not found","field":"url"}`)
	}
	return w.Result(), nil
}

// Every form field and query parameter the console accepts (url, device, op, prefix, the list's
// cursor after, csrf), in any bytes: no panic, no 5xx, the CSP on every answer, no parameter
// echoed into a page as markup, and a POST whose CSRF token is not the session's reaches no API.
func FuzzConsoleParams(f *testing.F) {
	f.Add("/ui/page", "https://shop.test/p/1", "desktop", "recache", "https://shop.test/", "", "", true)
	f.Add("/ui/pages", "https://shop.test/p/1", "", "rush-prefix", "https://shop.test/c/", "", "x", false)
	f.Add("/ui/pages", "", "", "", "https://shop.test/c/\"><script>", "desktop|https://shop.test/c/1", "", true)
	f.Add("/ui/pages", "", "mobile", "", strings.Repeat("p", 5000), "\xff", "", true)
	f.Add("/ui/preview", "\xff", "mobile\x00", "delete", "", "", "", true)
	f.Add("/ui/action", strings.Repeat("a", 5000), "", "nope", "", "", "", true)
	f.Add("/ui/login", "", "", "", "", "", "", false)
	f.Add("/ui/action", "https://shop.test/p/1", "", "recache", "", "", "", false)
	f.Fuzz(func(t *testing.T, path, u, device, op, prefix, after, csrf string, useCSRF bool) {
		api := &consoleAPI{}
		c, err := console.New(console.Options{Token: func() string { return "tok" }, API: &http.Client{Transport: api},
			Now: func() time.Time { return time.Unix(1_800_000_000, 0) }})
		if err != nil {
			t.Fatal(err)
		}
		login := httptest.NewRecorder()
		lr := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader("token=tok"))
		lr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		c.ServeHTTP(login, lr)
		var sess *http.Cookie
		for _, ck := range login.Result().Cookies() {
			sess = ck
		}
		page := httptest.NewRecorder()
		pr := httptest.NewRequest(http.MethodGet, "/ui/pages", nil)
		pr.AddCookie(sess)
		c.ServeHTTP(page, pr)
		body := page.Body.String()
		i := strings.Index(body, `name="csrf" value="`)
		good := body[i+len(`name="csrf" value="`):]
		good = good[:strings.IndexByte(good, '"')]
		if useCSRF {
			csrf = good
		}
		q := url.Values{"url": {u}, "device": {device}, "prefix": {prefix}, "after": {after}}
		form := url.Values{"url": {u}, "device": {device}, "op": {op}, "prefix": {prefix}, "csrf": {csrf}}
		target := "/ui/" + url.PathEscape(strings.TrimPrefix(path, "/ui/"))
		for _, r := range []*http.Request{
			httptest.NewRequest(http.MethodGet, target+"?"+q.Encode(), nil),
			httptest.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode())),
		} {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.AddCookie(sess)
			before := api.changes.Load()
			w := httptest.NewRecorder()
			c.ServeHTTP(w, r)
			if w.Code >= 500 {
				t.Fatalf("%s %s: %d %s", r.Method, r.URL, w.Code, w.Body)
			}
			if want := console.CSP; w.Header().Get("Content-Security-Policy") != want && w.Header().Get("Content-Security-Policy") != console.PreviewCSP {
				t.Fatalf("%s %s: CSP %q", r.Method, r.URL, w.Header().Get("Content-Security-Policy"))
			}
			if ct := w.Header().Get("Content-Type"); strings.HasPrefix(ct, "text/html") && r.URL.Path != "/ui/preview" &&
				(strings.Contains(w.Body.String(), "<script>") || strings.Contains(w.Body.String(), "<script ")) {
				t.Fatalf("%s %s: a parameter reached the page unescaped: %s", r.Method, r.URL, w.Body)
			}
			if r.Method == http.MethodPost && csrf != good && api.changes.Load() != before {
				t.Fatalf("POST %s with CSRF %q (the session's is %q) reached the API", r.URL, csrf, good)
			}
		}
	})
}
