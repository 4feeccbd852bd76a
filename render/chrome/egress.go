package chrome

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/freshq/freshq/render"
)

// egress is the browser's only way out: an HTTP proxy on loopback that Chromium is started with
// (--proxy-server, with loopback not bypassed), so that every request the browser makes — the
// document, its redirects, and every sub-resource a script asks for — is dialled here, through
// render's address guard (render.NewTransport): an internal address that render.domains does not
// list is refused on the address actually dialled, after DNS, as the http renderer refuses it.
// Chromium resolves no names itself when it uses a proxy, so DNS rebinding cannot pass either.
//
// The proxy listens on loopback, where any local user could connect to it: it serves only its
// own browsers. Each browser gets credentials of its own (newCredentials: a random name and a
// 260-bit random secret), which the proxy asks for (407, Proxy-Authenticate: Basic) and the browser
// answers through the Fetch domain (tab.answerChallenge); a request or tunnel without them, or
// with those of a browser that has closed, is refused before anything is dialled. They never
// reach the origin (Proxy-Authorization is a hop-by-hop header, removed when forwarding) and
// never leave the worker but to the browser, over its DevTools pipe.
//
// A refusal is a 403 carrying egressHeader, so that the renderer can tell the policy's refusal of
// a document from a page's own 403; a dial that fails is a 502 with the same header. A CONNECT
// that is refused fails the tunnel.
type egress struct {
	ln        net.Listener
	srv       *http.Server
	transport *http.Transport
	proxy     *httputil.ReverseProxy
	onRefuse  func()     // a dial refused by the address policy
	refusals  refusalLog // the tunnels the policy refused lately, by host:port
	wg        sync.WaitGroup

	credMu sync.Mutex
	creds  map[string]string // a live browser's proxy user name → its secret
}

// egressHeader marks a response the proxy made itself; its value is "policy" or "dial".
const egressHeader = "X-Freshq-Egress"

func startEgress(domains []string) (*egress, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &egress{ln: ln, transport: render.NewTransport(domains), creds: map[string]string{},
		refusals: refusalLog{keep: refusalKeep}}
	e.transport.MaxIdleConnsPerHost = 16
	e.proxy = &httputil.ReverseProxy{
		Rewrite:      func(pr *httputil.ProxyRequest) { pr.Out.URL, pr.Out.Host = pr.In.URL, pr.In.Host },
		Transport:    e.transport,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) { e.fail(w, err) },
	}
	e.srv = &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = e.srv.Serve(ln)
	}()
	return e, nil
}

// refusedRecently reports whether a tunnel to hostport was refused by the address policy since
// since: the browser only says that a tunnel failed.
func (e *egress) refusedRecently(hostport string, since time.Time) bool {
	return e.refusals.since(hostport, since)
}

// refusalLogMax bounds the host:ports the refusal log remembers: a page can make its browser
// dial any number of them, and the log lives as long as the worker.
const refusalLogMax = 1024

// refusalKeep is how long a refusal is worth remembering: a render asks only about refusals
// since it started, and no render outlasts render.timeout's ceiling (10m, config.Validate).
const refusalKeep = 10 * time.Minute

// refusalLog remembers when the address policy last refused a tunnel to each host:port, so that
// a render whose document's tunnel failed can say the policy refused it (the browser says only
// that the tunnel failed). Bounded: at refusalLogMax entries a new one first prunes every entry
// older than keep, then, if none was, evicts one arbitrary entry. An evicted refusal costs only
// its render's label (a tunnel failure rather than the policy's refusal); the render fails
// either way.
type refusalLog struct {
	mu   sync.Mutex
	keep time.Duration
	at   map[string]time.Time
}

func (l *refusalLog) record(hostport string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at == nil {
		l.at = map[string]time.Time{}
	}
	if _, known := l.at[hostport]; !known && len(l.at) >= refusalLogMax {
		for hp, at := range l.at {
			if now.Sub(at) > l.keep {
				delete(l.at, hp)
			}
		}
		for hp := range l.at {
			if len(l.at) < refusalLogMax {
				break
			}
			delete(l.at, hp)
		}
	}
	l.at[hostport] = now
}

func (l *refusalLog) since(hostport string, since time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.at[hostport]
	return ok && !at.Before(since)
}

func (l *refusalLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.at)
}

// newCredentials makes the proxy credentials of a new browser and admits them until revoked.
func (e *egress) newCredentials() (user, secret string) {
	user, secret = "browser-"+rand.Text(), rand.Text()+rand.Text()
	e.credMu.Lock()
	e.creds[user] = secret
	e.credMu.Unlock()
	return user, secret
}

// revoke ends a browser's credentials (it closed).
func (e *egress) revoke(user string) {
	e.credMu.Lock()
	delete(e.creds, user)
	e.credMu.Unlock()
}

// admitted reports whether r carries the credentials of a live browser.
func (e *egress) admitted(r *http.Request) bool {
	scheme, encoded, ok := strings.Cut(r.Header.Get("Proxy-Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return false
	}
	user, secret, ok := strings.Cut(string(raw), ":")
	if !ok {
		return false
	}
	e.credMu.Lock()
	want, known := e.creds[user]
	e.credMu.Unlock()
	return known && subtle.ConstantTimeCompare([]byte(secret), []byte(want)) == 1
}

// addr is the proxy's host:port, for --proxy-server.
func (e *egress) addr() string { return e.ln.Addr().String() }

func (e *egress) close() {
	_ = e.srv.Close()
	e.wg.Wait()
	e.transport.CloseIdleConnections()
}

func (e *egress) fail(w http.ResponseWriter, err error) {
	if errors.Is(err, render.ErrAddressPolicy) {
		if e.onRefuse != nil {
			e.onRefuse()
		}
		w.Header().Set(egressHeader, "policy")
		http.Error(w, render.ErrAddressPolicy.Error(), http.StatusForbidden)
		return
	}
	w.Header().Set(egressHeader, "dial")
	http.Error(w, "freshq egress: "+err.Error(), http.StatusBadGateway)
}

func (e *egress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !e.admitted(r) {
		w.Header().Set("Proxy-Authenticate", `Basic realm="freshq egress"`)
		http.Error(w, "freshq egress: proxy credentials required", http.StatusProxyAuthRequired)
		return
	}
	switch {
	case r.Method == http.MethodConnect:
		e.tunnel(w, r)
	case r.URL.IsAbs() && (r.URL.Scheme == "http" || r.URL.Scheme == "https"):
		e.proxy.ServeHTTP(w, r)
	default:
		http.Error(w, "freshq egress: a proxy request needs an absolute http URL", http.StatusBadRequest)
	}
}

// tunnel serves CONNECT: the TLS inside is the browser's, end to end.
func (e *egress) tunnel(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	up, err := e.transport.DialContext(ctx, "tcp", r.Host)
	cancel()
	if errors.Is(err, render.ErrAddressPolicy) {
		e.refusals.record(r.Host, time.Now())
	}
	if err != nil {
		e.fail(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "freshq egress: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		up.Close()
		down.Close()
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		splice(down, buf, up)
	}()
}

// splice copies both ways until either side ends, then closes both.
func splice(down net.Conn, buffered io.Reader, up net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, buffered); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	<-done
	down.Close()
	up.Close()
	<-done
}
