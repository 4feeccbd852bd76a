package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/net/netutil"

	"github.com/freshq/freshq/console"
	"github.com/freshq/freshq/internal/connguard"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// publicServer wraps the public listener: at most http.max_conns connections at once (more
// wait in the kernel's accept queue), and every connection bounded in time — its headers within
// http.read_header_timeout, a request within http.read_timeout, an answer within
// http.write_timeout, an idle keep-alive within http.idle_timeout — so that a client that
// sends slowly (slowloris) or never closes holds a connection only that long. Bulk endpoints
// get http.bulk_timeout instead, per request (see bulkDeadlines). A peer holds at most
// http.max_unauthenticated connections before its requests pass authorize (connguard). Its
// stop is a drain (s.drain, connguard.Drain): the socket may outlive this supervisor.
func (s *supervisor) publicServer(ln net.Listener) (*http.Server, net.Listener) {
	h := s.cfg.Load().HTTP
	srv := &http.Server{
		ConnContext:       connguard.ConnContext,
		ConnState:         s.drain.ConnState,
		Handler:           s.drain.Handler(s.handler()),
		ReadHeaderTimeout: h.ReadHeaderTimeout.D(),
		ReadTimeout:       h.ReadTimeout.D(),
		WriteTimeout:      h.WriteTimeout.D(),
		IdleTimeout:       h.IdleTimeout.D(),
		MaxHeaderBytes:    64 << 10,
	}
	// connguard outside: a connection it closes gives its max_conns slot back at once.
	return srv, s.drain.Listener(connguard.Listen(netutil.LimitListener(ln, h.MaxConns), h.MaxUnauthenticated,
		func() bool { return s.cfg.Load().Token != "" }))
}

// The admin listener's drain at a stop (connguard.Drain): connections open get
// listenerDrainGrace to send one more request or close, then the requests still in flight get
// listenerDrainBound.
const (
	listenerDrainGrace = 2 * time.Second
	listenerDrainBound = 5 * time.Second
)

// handler is the public listener: /metrics, /healthz and /readyz are answered from shared
// memory, so they work while worker 0 restarts; everything else goes to worker 0.
//
// In front of everything, in this order: the Host check (hostGuard), the cross-origin check
// on writes (crossOrigin), the bearer token (authorize), and per-request deadlines of bulk
// endpoints (bulkDeadlines).
func (s *supervisor) handler() http.Handler {
	reg := prometheus.NewRegistry()
	if s.metrics != nil { // nil only in unit tests of the handler
		reg.MustRegister(s.metrics)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{reg, s.serveGatherer()}, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"ok": true})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.worker0Status(r.Context())
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
			return d.DialContext(ctx, "unix", s.socket)
		},
		MaxIdleConnsPerHost: 32,
	}
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"error": "worker 0 is unavailable; retry shortly"})
	}
	mux.HandleFunc("GET /v1/series", s.seriesHandler)
	mux.Handle(console.Prefix, s.consoleHandler())
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
func (s *supervisor) bulkDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bulkEndpoints[r.Method+" "+r.URL.Path] {
			deadline := time.Now().Add(s.cfg.Load().HTTP.BulkTimeout.D())
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
func (s *supervisor) hostGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cfg := s.cfg.Load()
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || hostAllowed(cfg.Listen, cfg.HTTP.Hosts, r.Host) {
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
func (s *supervisor) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := s.cfg.Load().Token
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
func (s *supervisor) authorizeConsole(w http.ResponseWriter, r *http.Request, next http.Handler, bearer bool) {
	switch {
	case bearer || s.console != nil && s.console.Authenticated(r):
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

// loopbackOnly reports whether addr listens on loopback only.
func loopbackOnly(addr string) bool {
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
func (s *supervisor) noClaimsWhileStopping(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.stopping.Load() && r.Method == http.MethodPost && r.URL.Path == "/v1/claim" {
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

// worker0Status asks worker 0 whether it serves, over the supervisor's one status client
// (s.status): /readyz and the systemd loop reuse its keep-alive connections. A client per call
// left one idle unix connection behind per /readyz request, in both processes, until the idle
// timeout closed it.
func (s *supervisor) worker0Status(ctx context.Context) (wire.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return s.status.Status(ctx)
}

// notifySystemd sends READY=1 once worker 0 serves and its first sweep finished (or failed,
// or ready_timeout passed), then WATCHDOG=1 at half the watchdog interval for as long as every
// worker's heartbeat keeps advancing, and a one-line STATUS= summary.
func (s *supervisor) notifySystemd() {
	cfg := s.cfg.Load().Supervisor
	deadline := time.Now().Add(cfg.ReadyTimeout.D())
	for !s.stopping.Load() {
		st, err := s.worker0Status(context.Background())
		if err == nil && st.Sweeps+st.SweepFails > 0 {
			break
		}
		if time.Now().After(deadline) {
			s.log.Warn().Dur("ready_timeout", cfg.ReadyTimeout.D()).Msg("first sweep not finished; reporting ready anyway")
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s.stopping.Load() {
		return
	}
	notify("READY=1")
	s.log.Info().Msg("ready")
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		interval = 0
	}
	tick := 10 * time.Second
	if interval > 0 {
		tick = interval / 2
	}
	last := make([]uint64, len(s.children))
	lastMove := make([]time.Time, len(s.children))
	for i := range lastMove {
		lastMove[i] = time.Now()
	}
	for !s.stopping.Load() {
		time.Sleep(tick)
		healthy := true
		stall := s.cfg.Load().Supervisor.WatchdogStall.D()
		for i := range s.children {
			w, err := s.seg.Worker(i)
			if err != nil {
				continue
			}
			if b := w.Status().Beats; b != last[i] {
				last[i], lastMove[i] = b, time.Now()
			} else if time.Since(lastMove[i]) > stall {
				healthy = false
			}
		}
		rs := s.seg.Ready().Stats()
		notify("STATUS=" + statusLine(rs, s.seg.Floor().Load(), healthy))
		if interval > 0 && healthy {
			notify("WATCHDOG=1")
		}
	}
}

func statusLine(rs shm.ReadyStats, floor int64, healthy bool) string {
	state := "healthy"
	if !healthy {
		state = "a worker's heartbeat stalled"
	}
	return "gen " + strconv.FormatUint(rs.Gen, 10) + ", ready " + strconv.FormatUint(rs.Taken, 10) + "/" +
		strconv.FormatUint(rs.Count, 10) + ", floor " + time.UnixMilli(floor).UTC().Format(time.RFC3339) + ", " + state
}

func notify(state string) {
	daemon.SdNotify(false, state)
}

// serveScrapeTimeout bounds the read of worker 0's crawler-listener series at a scrape.
const serveScrapeTimeout = time.Second

// serveGatherer gathers worker 0's crawler-listener series (package serve) at a scrape, over
// the control socket. A worker 0 that does not answer leaves them out of that scrape (a
// missing series is honest, a stale one is not); they restart from zero with worker 0, as
// counters may.
func (s *supervisor) serveGatherer() prometheus.Gatherer {
	client := &http.Client{Timeout: serveScrapeTimeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.socket)
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
func (s *supervisor) pageWaits(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/pages" || !r.URL.Query().Has("wait") {
			next.ServeHTTP(w, r)
			return
		}
		cfg := s.cfg.Load()
		deadline := time.Now().Add(max(cfg.HTTP.ReadTimeout.D(), cfg.HTTP.WriteTimeout.D()) + cfg.Page.MaxWait.D())
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
