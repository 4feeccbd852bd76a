package admin

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/freshq/freshq/console"
	"github.com/freshq/freshq/internal/connguard"
	"github.com/freshq/freshq/wire"
)

// hostGuard refuses a request whose Host header names neither this listener nor a name in
// http.hosts, with 421 and a JSON error naming Host. It is the guard against DNS rebinding: a
// page on evil.example whose name is made to resolve to 127.0.0.1 reaches the listener as
// same-origin to the browser, but its requests carry Host: evil.example. Accepted:
//   - no Host at all (HTTP/1.0: not a browser);
//   - an IP address, when it is the listener's own, or any address when the listener is on
//     all interfaces (0.0.0.0, ::), or a loopback address when the listener is on loopback
//     (a rebinding page always carries a name, never an address);
//   - localhost, which browsers never resolve through DNS, and listen's own host name;
//   - a name in http.hosts (case-insensitive, a trailing dot ignored), for a listener reached
//     by name or behind a proxy that keeps the Host.
//
// The port is not compared: a port forward or a proxy may change it. /healthz and /readyz are
// exempt, so that a load balancer's probe, which may send any Host, still gets its answer.
func (s *Server) hostGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cfg := s.o.Settings()
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || hostAllowed(cfg.Listen, cfg.Hosts, r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		wire.WriteError(w, http.StatusMisdirectedRequest, "Host", fmt.Sprintf(
			"Host %q is not a name this listener answers to; add it to http.hosts in the configuration if it is one of its names", r.Host))
	})
}

// hostAllowed is hostGuard's rule for the Host header host under listen and http.hosts.
func hostAllowed(listen string, hosts []string, host string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	lhost, _, _ := net.SplitHostPort(listen)
	lhost = strings.ToLower(lhost)
	if ip, err := netip.ParseAddr(name); err == nil {
		ip = ip.Unmap()
		lip, err := netip.ParseAddr(lhost)
		switch {
		case lhost == "" || err == nil && lip.IsUnspecified():
			return true
		case err == nil:
			lip = lip.Unmap()
			return ip == lip || ip.IsLoopback() && lip.IsLoopback()
		default:
			return ip.IsLoopback() && lhost == "localhost"
		}
	}
	if name == "localhost" || name == strings.TrimSuffix(lhost, ".") {
		return true
	}
	for _, h := range hosts {
		if strings.ToLower(strings.TrimSuffix(h, ".")) == name {
			return true
		}
	}
	return false
}

// crossOrigin keeps a web page on another site from changing anything through the API, token
// or no token: with the default loopback listener and no token, any page the operator opens
// could otherwise POST to 127.0.0.1 (a text/plain or form POST needs no CORS preflight).
// Every request but GET, HEAD and OPTIONS is refused with 403 when the browser says it comes
// from another origin: Sec-Fetch-Site is present and not same-origin or none, or, from a
// browser that sends no Sec-Fetch-Site, Origin is present and is not this listener's origin
// (http.CrossOriginProtection). Every browser of the last years sends one of the two on a
// cross-origin POST; programs (curl, freshqctl, remote renderers, worker 0's clients) send
// neither and pass, whatever their Content-Type — so a plain `curl --data-binary @file`, which
// sends a form Content-Type, keeps working. That is why the guard looks at where a request
// comes from rather than refusing the content types a browser may send without a preflight.
func crossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		field := "Origin"
		if r.Header.Get("Sec-Fetch-Site") != "" {
			field = "Sec-Fetch-Site"
		}
		wire.WriteError(w, http.StatusForbidden, field, fmt.Sprintf(
			"cross-origin %s refused: a page on another site may not change this API; send it from a program (curl, freshqctl), which sends no Origin or Sec-Fetch-Site", r.Method))
	}))
	return cop.Handler(next)
}

// authorize requires the bearer token (config token or FRESHQ_TOKEN) on every request but the
// health probes, when one is set. Startup refuses a listener beyond loopback without one. A
// request that passes frees its connection of the per-peer bound on unauthenticated ones; a
// refused one closes its connection (connguard).
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := s.o.Settings().Token
		if token == "" { // nothing to check: every connection is as good as authenticated
			connguard.Authenticated(r.Context())
			next.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if strings.HasPrefix(r.URL.Path, console.Prefix) {
			s.authorizeConsole(w, r, next, ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1)
			return
		}
		if !ok && r.Method == http.MethodPost && r.URL.Path == "/recache" {
			got, ok = bodyToken(r)
		}
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			connguard.Refused(w)
			w.Header().Set("WWW-Authenticate", `Bearer realm="freshq"`)
			wire.WriteError(w, http.StatusUnauthorized, "Authorization", "missing or wrong bearer token")
			return
		}
		connguard.Authenticated(r.Context())
		next.ServeHTTP(w, r)
	})
}

// authorizeConsole is authorize under /ui/: the bearer token (bearer) or the console's session
// cookie, which only the token's holder got (package console), lets a request in as
// authenticated; the login form and its assets are answered to anyone, still counted against
// the peer's bound on unauthenticated connections; anything else is sent to the login form.
func (s *Server) authorizeConsole(w http.ResponseWriter, r *http.Request, next http.Handler, bearer bool) {
	switch {
	case bearer || s.o.Console.Authenticated(r):
		connguard.Authenticated(r.Context())
		next.ServeHTTP(w, r)
	case console.Public(r):
		next.ServeHTTP(w, r)
	default:
		connguard.Refused(w)
		console.Unauthenticated(w, r)
	}
}

// bodyToken reads the token the hosted prerender service's tools send in a recache's body
// ({"prerenderToken": "…", …}) when they send no Authorization header, and puts the body back
// for the API. The body is read up to wire.MaxOperateBody, the API's own bound: a longer one is
// refused as unauthorized without being read further. ok is false when there is no such token.
func bodyToken(r *http.Request) (string, bool) {
	b, err := io.ReadAll(io.LimitReader(r.Body, wire.MaxOperateBody+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil || len(b) > wire.MaxOperateBody {
		return "", false
	}
	var call struct {
		PrerenderToken string `json:"prerenderToken"`
	}
	if json.Unmarshal(b, &call) != nil || call.PrerenderToken == "" {
		return "", false
	}
	return call.PrerenderToken, true
}

// LoopbackOnly reports whether addr listens on loopback only.
func LoopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
