package admin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/net/netutil"

	"github.com/freshq/freshq/console"
	"github.com/freshq/freshq/internal/connguard"
	"github.com/freshq/freshq/wire"
)

// Options are the admin listener's dependencies.
type Options struct {
	// Settings are the settings in force, read at each request: a reload applies at once.
	Settings func() Settings
	Socket   string // worker 0's control socket: the proxy's and the serve series' way in
	// Status asks worker 0 whether it serves, for /readyz (bounded in time by the caller).
	Status func(ctx context.Context) (wire.Status, error)
	// Stopping reports whether the pool's stop began: remote claims are then refused.
	Stopping func() bool
	// Metrics are the series answered from shared memory at /metrics (shmmetrics); nil: none.
	Metrics prometheus.Collector
	// Console is the console at /ui/, Series the overview's GET /v1/series (package ui).
	Console *console.Console
	Series  http.HandlerFunc
}

// Settings are the admin listener's settings: listen, token, http.* and page.max_wait in the
// configuration.
type Settings struct {
	Listen string   // the listener's address, for the Host check
	Token  string   // the bearer token; "": none
	Hosts  []string // http.hosts: names the Host header may carry besides listen's host and localhost
	// The connection bounds (http.max_conns, http.max_unauthenticated) and time bounds
	// (http.read_header_timeout, read_timeout, write_timeout, idle_timeout, bulk_timeout).
	MaxConns, MaxUnauthenticated                                           int
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout, BulkTimeout time.Duration
	PageMaxWait                                                            time.Duration // page.max_wait: the longest wait for a render on miss
}

// ErrMissing is returned by New when a dependency is missing.
var ErrMissing = errors.New("admin: missing dependency")

// Server is the admin listener's HTTP surface.
type Server struct {
	o     Options
	waits waitStop        // closed when the stop begins: requests waiting for a render on miss end
	drain connguard.Drain // the listener's stop
}

// New is the admin listener's surface over o.
func New(o Options) (*Server, error) {
	if o.Settings == nil || o.Socket == "" || o.Status == nil || o.Stopping == nil || o.Console == nil || o.Series == nil {
		return nil, fmt.Errorf("%w: Settings, Socket, Status, Stopping, Console and Series", ErrMissing)
	}
	return &Server{o: o}, nil
}

// EndWaits ends the requests waiting for a render on miss, and refuses the next ones' waits:
// the pool stops, and its render workers render nothing more. Safe twice.
func (s *Server) EndWaits() { s.waits.stop() }

// Stop drains the admin listener served by srv (connguard.Drain): connections open get
// DrainGrace to send one more request or close, then the requests in flight get DrainBound.
func (s *Server) Stop(srv *http.Server) { s.drain.Stop(srv, DrainGrace, DrainBound) }

// HTTPServer wraps the public listener: at most http.max_conns connections at once (more
// wait in the kernel's accept queue), and every connection bounded in time — its headers within
// http.read_header_timeout, a request within http.read_timeout, an answer within
// http.write_timeout, an idle keep-alive within http.idle_timeout — so that a client that
// sends slowly (slowloris) or never closes holds a connection only that long. Bulk endpoints
// get http.bulk_timeout instead, per request (see bulkDeadlines). A peer holds at most
// http.max_unauthenticated connections before its requests pass authorize (connguard). Its
// stop is a drain (Stop, connguard.Drain): the socket may outlive this supervisor.
func (s *Server) HTTPServer(ln net.Listener) (*http.Server, net.Listener) {
	h := s.o.Settings()
	srv := &http.Server{
		ConnContext:       connguard.ConnContext,
		ConnState:         s.drain.ConnState,
		Handler:           s.drain.Handler(s.Handler()),
		ReadHeaderTimeout: h.ReadHeaderTimeout,
		ReadTimeout:       h.ReadTimeout,
		WriteTimeout:      h.WriteTimeout,
		IdleTimeout:       h.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	// connguard outside: a connection it closes gives its max_conns slot back at once.
	return srv, s.drain.Listener(connguard.Listen(netutil.LimitListener(ln, h.MaxConns), h.MaxUnauthenticated,
		func() bool { return s.o.Settings().Token != "" }))
}

// The admin listener's drain at a stop (connguard.Drain): connections open get DrainGrace to
// send one more request or close, then the requests still in flight get DrainBound.
const (
	DrainGrace = 2 * time.Second
	DrainBound = 5 * time.Second
)

// Handler is the public listener: /metrics, /healthz and /readyz are answered from shared
// memory, so they work while worker 0 restarts; everything else goes to worker 0.
//
// In front of everything, in this order: the Host check (hostGuard), the cross-origin check
// on writes (crossOrigin), the bearer token (authorize), and per-request deadlines of bulk
// endpoints (bulkDeadlines).
func (s *Server) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	if s.o.Metrics != nil {
		reg.MustRegister(s.o.Metrics)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{reg, s.serveGatherer()}, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"ok": true})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.o.Status(r.Context())
		ready := err == nil && st.Serving && st.Sweeps+st.SweepFails > 0
		w.Header().Set("Content-Type", "application/json")
		if !ready {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(map[string]any{"ready": ready, "worker0": err == nil, "sweeps": st.Sweeps})
	})
	target, _ := url.Parse("http://worker0")
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.o.Socket)
		},
		MaxIdleConnsPerHost: 32,
	}
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"error": "worker 0 is unavailable; retry shortly"})
	}
	mux.HandleFunc("GET /v1/series", s.o.Series)
	mux.Handle(console.Prefix, s.o.Console)
	mux.Handle("/", internalGuard(s.noClaimsWhileStopping(s.pageWaits(proxy))))
	return s.hostGuard(crossOrigin(s.authorize(s.bulkDeadlines(mux))))
}

// bulkEndpoints stream large bodies in, or work long before they answer: they get
// http.bulk_timeout to read the request and to answer, instead of read_timeout and write_timeout.
var bulkEndpoints = map[string]bool{
	"POST /v1/targets": true, "POST /v1/sitemaps": true, "POST /v1/results": true, "POST /v1/prioritize": true,
	// A keys check or migrate reads every stored key before it answers.
	"GET /v1/keys/check": true, "POST /v1/keys/migrate": true,
}

// bulkDeadlines moves the connection's read and write deadlines of a bulk request to
// http.bulk_timeout from now. Every other request keeps the server's shorter bounds.
func (s *Server) bulkDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bulkEndpoints[r.Method+" "+r.URL.Path] {
			deadline := time.Now().Add(s.o.Settings().BulkTimeout)
			rc := http.NewResponseController(w)
			rc.SetReadDeadline(deadline)
			rc.SetWriteDeadline(deadline)
		}
		next.ServeHTTP(w, r)
	})
}

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

// noClaimsWhileStopping refuses a remote renderer's claim once the pool stops: the listener
// stays up while the render workers drain, and a lease granted then would only be given back
// or lapse. 503 with Retry-After says "come back to the next instance". Results, extensions
// and releases still pass: they end leases that remote renders already hold.
func (s *Server) noClaimsWhileStopping(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.o.Stopping() && r.Method == http.MethodPost && r.URL.Path == "/v1/claim" {
			w.Header().Set("Retry-After", "5")
			wire.WriteError(w, http.StatusServiceUnavailable, "", "freshq is stopping: no new leases; retry shortly")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// internalGuard keeps worker 0's internal endpoints off the public listener.
func internalGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.URL.Path) >= len("/internal/") && r.URL.Path[:len("/internal/")] == "/internal/" {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveScrapeTimeout bounds the read of worker 0's crawler-listener series at a scrape.
const serveScrapeTimeout = time.Second

// serveGatherer gathers worker 0's crawler-listener series (package serve) at a scrape, over
// the control socket. A worker 0 that does not answer leaves them out of that scrape (a
// missing series is honest, a stale one is not); they restart from zero with worker 0, as
// counters may.
func (s *Server) serveGatherer() prometheus.Gatherer {
	client := &http.Client{Timeout: serveScrapeTimeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.o.Socket)
		},
		MaxIdleConnsPerHost: 1,
	}}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		resp, err := client.Get("http://worker0" + wire.PathServeMetrics)
		if err != nil {
			return nil, nil
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, nil
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 4<<20))
		if err != nil {
			return nil, fmt.Errorf("worker 0's serve metrics: %w", err)
		}
		out := make([]*dto.MetricFamily, 0, len(fams))
		for _, f := range fams {
			out = append(out, f)
		}
		return out, nil
	})
}

// pageWaits gives a request that waits for a render on miss (POST /v1/pages?wait=) the time
// it may wait: its connection's read and write deadlines move to http.read_timeout and
// http.write_timeout, whichever is longer, plus page.max_wait from now (worker 0 refuses a
// longer wait). And it ends the wait when the pool stops (waitStop): the render workers stop
// first and render nothing more, so the waiter is answered 503 at once by the proxy's error
// handler instead of holding the listener's shutdown up until its wait runs out.
func (s *Server) pageWaits(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/pages" || !r.URL.Query().Has("wait") {
			next.ServeHTTP(w, r)
			return
		}
		cfg := s.o.Settings()
		deadline := time.Now().Add(max(cfg.ReadTimeout, cfg.WriteTimeout) + cfg.PageMaxWait)
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(deadline)
		rc.SetWriteDeadline(deadline)
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-s.waits.done():
				cancel()
			case <-ctx.Done():
			}
		}()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// waitStop is closed when the pool starts stopping; the requests waiting for a render on miss
// end with it (pageWaits). The zero value is ready to use; stop is safe twice.
type waitStop struct {
	mu sync.Mutex
	ch chan struct{}
}

func (ws *waitStop) done() <-chan struct{} {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.ch == nil {
		ws.ch = make(chan struct{})
	}
	return ws.ch
}

func (ws *waitStop) stop() {
	ws.done()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	select {
	case <-ws.ch:
	default:
		close(ws.ch)
	}
}
