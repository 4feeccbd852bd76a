package console

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

// fakeAPI is worker 0's operator API as the console reads it: a handler answered in process,
// recording the calls that change something.
type fakeAPI struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	f.serve(w, r)
	return w.Result(), nil
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/queue":
		v := wire.QueueView{Backlog: map[string]uint64{"urgent": 1, "submitted": 2, "discovered": 3, "cold": 4}}
		v.Capacity = &wire.Capacity{}
		v.Capacity.Projection.Verdict = "keeping_up"
		json.NewEncoder(w).Encode(v)
	case "GET /v1/targets":
		if r.URL.Query().Get("url") != "https://shop.test/p/1" {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]string{"error": "unknown target", "field": "url"})
			return
		}
		json.NewEncoder(w).Encode(wire.Explanation{URL: "https://shop.test/p/1", Device: "desktop", Lane: "cold"})
	case "GET /v1/pages":
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Security-Policy", "script-src 'none'")
		io.WriteString(w, "<p>stored</p>")
	case "GET /v1/cluster":
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]string{"error": "badger", "field": "store.backend"})
	case "POST /v1/prioritize", "POST /recache", "DELETE /v1/targets":
		var b []byte
		if r.Body != nil {
			b, _ = io.ReadAll(r.Body)
		}
		f.mu.Lock()
		f.calls = append(f.calls, r.Method+" "+r.URL.Path+" "+r.URL.RawQuery+" "+string(b))
		f.mu.Unlock()
		io.WriteString(w, "{}")
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":"not here"}`)
	}
}

func (f *fakeAPI) changes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

type fixture struct {
	c     *Console
	api   *fakeAPI
	now   time.Time
	token string
}

func newFixture(t *testing.T, token string) *fixture {
	t.Helper()
	f := &fixture{api: &fakeAPI{}, now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), token: token}
	c, err := New(Options{Token: func() string { return f.token }, API: &http.Client{Transport: f.api},
		Now: func() time.Time { return f.now }, SessionTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

func (f *fixture) do(method, target string, form url.Values, cookie *http.Cookie) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != nil {
		r.AddCookie(cookie)
	}
	w := httptest.NewRecorder()
	f.c.ServeHTTP(w, r)
	return w
}

func sessionCookie(t *testing.T, w *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	for _, c := range w.Result().Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie set; headers %v", CookieName, w.Header())
	return nil
}

// The login form checks the admin token whole and sets a session cookie that is HttpOnly,
// SameSite=Strict, Secure over TLS, and holds no token: a wrong token sets none.
func TestLoginSetsAStrictCookieWithoutTheToken(t *testing.T) {
	f := newFixture(t, "s3cret-token")
	for _, bad := range []string{"", "s3cret", "s3cret-tokeN", "s3cret-token2"} {
		w := f.do(http.MethodPost, "/ui/login", url.Values{"token": {bad}}, nil)
		if w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 {
			t.Errorf("token %q: %d, cookies %v; want 401 and no cookie", bad, w.Code, w.Result().Cookies())
		}
	}
	w := f.do(http.MethodPost, "/ui/login", url.Values{"token": {"s3cret-token"}}, nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/" {
		t.Fatalf("right token: %d to %q, want 303 to /ui/", w.Code, w.Header().Get("Location"))
	}
	ck := sessionCookie(t, w)
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Path != "/ui/" {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path /ui/, not Secure over plain HTTP", ck)
	}
	if strings.Contains(ck.Value, "s3cret") {
		t.Errorf("cookie %q holds the token", ck.Value)
	}
	r := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader("token=s3cret-token"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.TLS = &tls.ConnectionState{}
	tw := httptest.NewRecorder()
	f.c.ServeHTTP(tw, r)
	if !sessionCookie(t, tw).Secure {
		t.Error("over TLS the cookie is not Secure")
	}
}

// A session lasts its TTL on the console's clock, and no longer; a session signed before the
// token was rotated (a reload) no longer checks; a forged or truncated cookie never does.
func TestSessionExpiresAndEndsWithTheToken(t *testing.T) {
	f := newFixture(t, "s3cret-token")
	ck := sessionCookie(t, f.do(http.MethodPost, "/ui/login", url.Values{"token": {"s3cret-token"}}, nil))
	auth := func() bool {
		r := httptest.NewRequest(http.MethodGet, "/ui/", nil)
		r.AddCookie(ck)
		return f.c.Authenticated(r)
	}
	if !auth() {
		t.Fatal("a fresh session does not authenticate")
	}
	f.now = f.now.Add(59 * time.Minute)
	if !auth() {
		t.Error("a session 59 minutes old of a 1 hour TTL does not authenticate")
	}
	f.now = f.now.Add(time.Minute)
	if auth() {
		t.Error("a session past its TTL still authenticates")
	}
	f.now = f.now.Add(-time.Hour)
	if !auth() {
		t.Fatal("back within the TTL, the session does not authenticate")
	}
	f.token = "rotated"
	if auth() {
		t.Error("a session signed under the old token still authenticates after a rotation")
	}
	f.token = "s3cret-token"
	for _, v := range []string{"", "x", ck.Value + "x", strings.Replace(ck.Value, ".", ".9", 1), "a.b.c.d"} {
		r := httptest.NewRequest(http.MethodGet, "/ui/", nil)
		r.AddCookie(&http.Cookie{Name: CookieName, Value: v})
		if f.c.Authenticated(r) {
			t.Errorf("cookie %q authenticates", v)
		}
	}
}

// csrfOf reads the CSRF token a page's forms carry.
func csrfOf(t *testing.T, body string) string {
	t.Helper()
	const marker = `name="csrf" value="`
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	rest := body[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

// Every POST of the console carries the session's CSRF token: without it, with a wrong one or
// with another session's, it is 403 and reaches no API; with it, the action is the API's call.
func TestActionsNeedTheSessionsCSRFToken(t *testing.T) {
	f := newFixture(t, "s3cret-token")
	ck := sessionCookie(t, f.do(http.MethodPost, "/ui/login", url.Values{"token": {"s3cret-token"}}, nil))
	other := sessionCookie(t, f.do(http.MethodPost, "/ui/login", url.Values{"token": {"s3cret-token"}}, nil))
	page := f.do(http.MethodGet, "/ui/page?url=https://shop.test/p/1", nil, ck)
	if page.Code != http.StatusOK {
		t.Fatalf("page view: %d %s", page.Code, page.Body)
	}
	token := csrfOf(t, page.Body.String())
	otherToken := csrfOf(t, f.do(http.MethodGet, "/ui/", nil, other).Body.String())
	form := func(csrf string) url.Values {
		v := url.Values{"op": {"recache"}, "url": {"https://shop.test/p/1"}}
		if csrf != "" {
			v.Set("csrf", csrf)
		}
		return v
	}
	for name, csrf := range map[string]string{"none": "", "wrong": "x" + token, "another session's": otherToken} {
		w := f.do(http.MethodPost, "/ui/action", form(csrf), ck)
		if w.Code != http.StatusForbidden {
			t.Errorf("CSRF token %s: %d, want 403", name, w.Code)
		}
	}
	if w := f.do(http.MethodPost, "/ui/logout", url.Values{}, ck); w.Code != http.StatusForbidden {
		t.Errorf("logout without the CSRF token: %d, want 403", w.Code)
	}
	if got := f.api.changes(); len(got) != 0 {
		t.Fatalf("refused POSTs reached the API: %q", got)
	}
	for op, want := range map[string]string{
		"recache": `POST /recache  {"url":"https://shop.test/p/1"}`,
		"rush":    `POST /v1/prioritize  {"url":"https://shop.test/p/1","mode":"rush"}`,
		"delete":  `DELETE /v1/targets url=https%3A%2F%2Fshop.test%2Fp%2F1 `,
	} {
		v := form(token)
		v.Set("op", op)
		w := f.do(http.MethodPost, "/ui/action", v, ck)
		if w.Code != http.StatusSeeOther {
			t.Errorf("%s with the CSRF token: %d %s, want 303", op, w.Code, w.Body)
			continue
		}
		got := f.api.changes()
		if last := strings.TrimSpace(got[len(got)-1]); last != strings.TrimSpace(want) {
			t.Errorf("%s called %q, want %q", op, last, want)
		}
	}
}

// Every console answer carries the strict CSP (pages, errors, the login form, assets, the
// chart); the stored page's preview carries its sandbox CSP instead of the page's own.
func TestEveryAnswerCarriesTheCSP(t *testing.T) {
	f := newFixture(t, "")
	for _, target := range []string{"/ui/", "/ui/pages", "/ui/page?url=https://shop.test/p/1", "/ui/page?url=https://shop.test/nope",
		"/ui/sites", "/ui/failures", "/ui/cluster", "/ui/chart.svg", "/ui/login", "/ui/static/console.css", "/ui/nothing"} {
		w := f.do(http.MethodGet, target, nil, nil)
		if got := w.Header().Get("Content-Security-Policy"); got != CSP {
			t.Errorf("GET %s (%d): CSP %q, want %q", target, w.Code, got, CSP)
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", target)
		}
	}
	w := f.do(http.MethodGet, "/ui/preview?url=https://shop.test/p/1", nil, nil)
	if got := w.Header().Get("Content-Security-Policy"); got != PreviewCSP || w.Body.String() != "<p>stored</p>" {
		t.Errorf("preview: CSP %q body %q, want %q and the stored page", got, w.Body, PreviewCSP)
	}
	if w := f.do(http.MethodGet, "/ui/page?url=https://shop.test/nope", nil, nil); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `data-field="url"`) {
		t.Errorf("unknown page: %d %s, want the API's 404 naming url", w.Code, w.Body)
	}
	if w := f.do(http.MethodGet, "/ui/cluster", nil, nil); !strings.Contains(w.Body.String(), `id="single-node"`) {
		t.Errorf("cluster on Badger: %s, want single node", w.Body)
	}
}

// With no token configured (a loopback listener), a request without a cookie gets a session
// anyway, so that its forms carry a CSRF token, and an action still needs it.
func TestNoTokenStillNeedsCSRF(t *testing.T) {
	f := newFixture(t, "")
	w := f.do(http.MethodGet, "/ui/pages", nil, nil)
	ck := sessionCookie(t, w)
	if w := f.do(http.MethodPost, "/ui/action", url.Values{"op": {"rush-prefix"}, "prefix": {"https://shop.test/c/"}}, ck); w.Code != http.StatusForbidden {
		t.Errorf("no token, no CSRF: %d, want 403", w.Code)
	}
	v := url.Values{"op": {"rush-prefix"}, "prefix": {"https://shop.test/c/"}, "csrf": {csrfOf(t, w.Body.String())}}
	if w := f.do(http.MethodPost, "/ui/action", v, ck); w.Code != http.StatusSeeOther {
		t.Errorf("no token, CSRF: %d %s, want 303", w.Code, w.Body)
	}
}

// Unauthenticated sends a page to the login form and refuses anything else.
func TestUnauthenticated(t *testing.T) {
	w := httptest.NewRecorder()
	Unauthenticated(w, httptest.NewRequest(http.MethodGet, "/ui/sites", nil))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/login" || w.Header().Get("Content-Security-Policy") != CSP {
		t.Errorf("GET: %d to %q", w.Code, w.Header().Get("Location"))
	}
	w = httptest.NewRecorder()
	Unauthenticated(w, httptest.NewRequest(http.MethodPost, "/ui/action", nil))
	if w.Code != http.StatusUnauthorized {
		t.Errorf("POST: %d, want 401", w.Code)
	}
}
