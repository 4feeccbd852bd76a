// Package console is the web console of the admin listener, mounted by the supervisor at /ui/:
// the pages a site's owner and an operator read (overview, pages, sites, failures, cluster)
// and the actions they take (rush, recache, delete), rendered on the server as HTML and SVG.
//
// Invariants:
//   - The console holds no figure of its own: every figure it shows is read, at the request,
//     from worker 0's operator API (the same endpoints and the same socket the admin
//     listener proxies to), and every action is a call of that API, so what the console shows
//     and does equals what the API answers and does, by construction.
//   - It is behind the admin listener's guards (Host, cross-origin, authentication). Its
//     authentication is the admin token's: a bearer token as the API takes it, or a session
//     cookie the login form sets after checking the token. The cookie holds no token: it is an
//     expiry and an HMAC of it under a key derived from the token in force, so a reload that
//     rotates the token ends every session. With no token configured (a loopback listener),
//     every request is as good as authenticated, as on the API.
//   - Every action is a POST carrying a CSRF token (an HMAC of the session cookie under the
//     same key); a POST without it, or with another's, is 403 and does nothing.
//   - Every answer carries a strict Content-Security-Policy (CSP): no script, style, image or
//     frame from outside the origin, no inline script; the assets are embedded in the binary
//     (go:embed), so the console makes no request beyond the listener. The stored page's
//     preview is served with a sandbox CSP of its own (PreviewCSP) that runs no script and
//     loads nothing.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Prefix is where the supervisor mounts the console.
const Prefix = "/ui/"

// CSP is the Content-Security-Policy of every console answer but the preview.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// PreviewCSP is the stored page's preview's: a sandbox (no script, an opaque origin) that
// loads nothing but inline styles and data: images, so a stored page reaches no other host
// from the operator's browser.
const PreviewCSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:"

// CookieName is the session cookie's name.
const CookieName = "freshq_console"

// maxForm bounds a form's body: a few fields, a URL among them.
const maxForm = 16 << 10

// DefaultSessionTTL is how long a login lasts.
const DefaultSessionTTL = 12 * time.Hour

// ErrBadSession is a session cookie that does not check: malformed, expired, or signed under
// another key (the token was rotated).
var ErrBadSession = errors.New("console: no valid session")

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure a Console.
type Options struct {
	// Token is the admin token in force, asked at each request ("" : none configured).
	Token func() string
	// API calls worker 0's operator API: requests to http://worker0/… reach the control
	// socket, as the admin listener's proxy sends them.
	API *http.Client
	// Now is the clock of session expiries; nil: time.Now.
	Now func() time.Time
	// SessionTTL is how long a login lasts; 0: DefaultSessionTTL.
	SessionTTL time.Duration
	// Series is the ring of the overview's chart (GET /v1/series); nil: no chart.
	Series func() []Sample
	Log    zerolog.Logger
}

// Console is the http.Handler of /ui/.
type Console struct {
	opt      Options
	noTokKey []byte // the session key while no token is configured: random, per process
	pages    map[string]*template.Template
	static   http.Handler
}

// New returns the console.
func New(opt Options) (*Console, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.SessionTTL <= 0 {
		opt.SessionTTL = DefaultSessionTTL
	}
	if opt.Token == nil {
		opt.Token = func() string { return "" }
	}
	c := &Console{opt: opt, noTokKey: make([]byte, 32), pages: map[string]*template.Template{}}
	if _, err := rand.Read(c.noTokKey); err != nil {
		return nil, fmt.Errorf("console: session key: %w", err)
	}
	base, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	for _, name := range []string{"login", "overview", "pages", "page", "sites", "failures", "cluster", "error"} {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		c.pages[name] = t
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("console: assets: %w", err)
	}
	c.static = http.StripPrefix(Prefix+"static/", http.FileServerFS(sub))
	return c, nil
}

// key is the HMAC key of sessions and CSRF tokens under the token in force: derived from it,
// so that rotating the token invalidates every cookie signed before.
func (c *Console) key() []byte {
	tok := c.opt.Token()
	if tok == "" {
		return c.noTokKey
	}
	m := hmac.New(sha256.New, []byte(tok))
	m.Write([]byte("freshq console session key v1"))
	return m.Sum(nil)
}

func mac(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newSession is a cookie value: a random nonce, the expiry (unix seconds) and their HMAC.
func (c *Console) newSession() (string, time.Time) {
	nonce := make([]byte, 12)
	rand.Read(nonce)
	exp := c.opt.Now().Add(c.opt.SessionTTL).Truncate(time.Second)
	n := base64.RawURLEncoding.EncodeToString(nonce)
	e := strconv.FormatInt(exp.Unix(), 10)
	return n + "." + e + "." + mac(c.key(), "session", n, e), exp
}

// checkSession reports whether v is a session cookie signed under the key in force and not
// expired at the console's clock.
func (c *Console) checkSession(v string) error {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return ErrBadSession
	}
	want := mac(c.key(), "session", parts[0], parts[1])
	if subtle.ConstantTimeCompare([]byte(want), []byte(parts[2])) != 1 {
		return ErrBadSession
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !c.opt.Now().Before(time.Unix(exp, 0)) {
		return ErrBadSession
	}
	return nil
}

// csrf is the CSRF token of the session cookie v.
func (c *Console) csrf(v string) string { return mac(c.key(), "csrf", v) }

// Authenticated reports whether r carries a valid session cookie. The supervisor's authorize
// asks it for a request under /ui/ that has no bearer token.
func (c *Console) Authenticated(r *http.Request) bool {
	ck, err := r.Cookie(CookieName)
	return err == nil && c.checkSession(ck.Value) == nil
}

// Public reports whether r may be answered without authentication: the login form and its
// assets. Everything else under /ui/ needs the token or a session.
func Public(r *http.Request) bool {
	p := r.URL.Path
	return p == Prefix+"login" || strings.HasPrefix(p, Prefix+"static/")
}

// Unauthenticated answers a request under /ui/ that has neither token nor session: a page
// is sent to the login form (303), anything else 401.
func Unauthenticated(w http.ResponseWriter, r *http.Request) {
	setHeaders(w.Header())
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
		return
	}
	http.Error(w, "log in first: "+Prefix+"login", http.StatusUnauthorized)
}

func setHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

// ServeHTTP routes /ui/. The supervisor has already checked the Host, the origin, and the
// credentials (or Public).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setHeaders(w.Header())
	path := strings.TrimPrefix(r.URL.Path, Prefix)
	if strings.HasPrefix(path, "static/") {
		w.Header().Set("Cache-Control", "max-age=3600")
		c.static.ServeHTTP(w, r)
		return
	}
	if path == "login" {
		c.login(w, r)
		return
	}
	sess := c.session(w, r)
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil || !c.csrfOK(sess, r.PostForm.Get("csrf")) {
			c.fail(w, r, sess, http.StatusForbidden, "csrf", "the form's CSRF token is missing or wrong: reload the page and try again")
			return
		}
	}
	switch {
	case r.Method == http.MethodGet && path == "":
		c.overview(w, r, sess)
	case r.Method == http.MethodGet && path == "pages":
		c.pagesView(w, r, sess)
	case r.Method == http.MethodGet && path == "page":
		c.pageView(w, r, sess)
	case r.Method == http.MethodGet && path == "preview":
		c.preview(w, r)
	case r.Method == http.MethodGet && path == "sites":
		c.sites(w, r, sess)
	case r.Method == http.MethodGet && path == "failures":
		c.failures(w, r, sess)
	case r.Method == http.MethodGet && path == "cluster":
		c.cluster(w, r, sess)
	case r.Method == http.MethodGet && path == "chart.svg":
		c.chart(w, r)
	case r.Method == http.MethodPost && path == "action":
		c.action(w, r, sess)
	case r.Method == http.MethodPost && path == "logout":
		c.logout(w, r)
	default:
		c.fail(w, r, sess, http.StatusNotFound, "path", "no such page")
	}
}

// session is the request's session cookie value. A request without one was let in by the
// bearer token or by a listener with no token: it gets a fresh session, so that its forms
// carry a CSRF token too.
func (c *Console) session(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(CookieName); err == nil && c.checkSession(ck.Value) == nil {
		return ck.Value
	}
	v, exp := c.newSession()
	http.SetCookie(w, c.cookie(r, v, exp))
	return v
}

func (c *Console) cookie(r *http.Request, v string, exp time.Time) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: v, Path: Prefix, Expires: exp, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

func (c *Console) csrfOK(sess, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(c.csrf(sess)), []byte(got)) == 1
}

// login shows the form (GET) or checks the token (POST) and sets the session cookie. It
// needs no CSRF token: it grants a session only to whoever knows the admin token, and the
// admin listener's cross-origin guard refuses a POST from another site already.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	tok := c.opt.Token()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		c.render(w, http.StatusOK, "login", map[string]any{"NoToken": tok == ""})
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			c.render(w, http.StatusBadRequest, "login", map[string]any{"Error": "the form did not parse"})
			return
		}
		got := r.PostForm.Get("token")
		if tok != "" && subtle.ConstantTimeCompare([]byte(got), []byte(tok)) != 1 {
			w.Header().Set("Connection", "close")
			c.render(w, http.StatusUnauthorized, "login", map[string]any{"Error": "wrong token"})
			return
		}
		v, exp := c.newSession()
		http.SetCookie(w, c.cookie(r, v, exp))
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// page is what every view's template gets besides its own data.
type page struct {
	Title string
	Nav   string
	CSRF  string
	Data  any
	Error string
}

func (c *Console) view(w http.ResponseWriter, status int, name, nav, sess string, data any) {
	c.render(w, status, name, page{Title: nav, Nav: nav, CSRF: c.csrf(sess), Data: data})
}

func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	if err := c.pages[name].ExecuteTemplate(&b, "layout", data); err != nil {
		c.opt.Log.Error().Err(err).Str("template", name).Msg("console template")
		http.Error(w, "the console failed to render this page", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	w.Write([]byte(b.String()))
}

// fail answers an error as a page naming the field at fault.
func (c *Console) fail(w http.ResponseWriter, _ *http.Request, sess string, status int, field, msg string) {
	c.render(w, status, "error", page{Title: "error", CSRF: c.csrf(sess), Error: msg, Data: map[string]any{"Field": field, "Status": status}})
}

// ctx bounds a read of the API.
func apiCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 5*time.Second)
}
