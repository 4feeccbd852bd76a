package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
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
