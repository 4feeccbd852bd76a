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

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/console"
	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/internal/connguard"
	"github.com/freshq/freshq/outcome"
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
	reg.MustRegister(&collector{s: s})
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

// collector turns the segment's counters into the metrics docs/METRICS.md lists, at
// each scrape.
type collector struct{ s *supervisor }

var (
	descClaim     = prometheus.NewDesc("freshq_claim_granted_total", "Jobs granted, by where they came from.", []string{"source"}, nil)
	descSweep     = prometheus.NewDesc("freshq_ready_sweep_seconds", "Duration of the last sweep, and sweeps by outcome.", []string{"outcome"}, nil)
	descSweeps    = prometheus.NewDesc("freshq_ready_sweeps_total", "Sweeps by outcome.", []string{"outcome"}, nil)
	descPublished = prometheus.NewDesc("freshq_ready_published", "Entries in the active ready-set generation.", nil, nil)
	descReadyGen  = prometheus.NewDesc("freshq_ready_generation", "The active ready-set generation (0 = cold).", nil, nil)
	descCadence   = prometheus.NewDesc("freshq_ready_cadence_total", "Rows scored, by where their cadence came from.", []string{"origin"}, nil)
	descBacklog   = prometheus.NewDesc("freshq_backlog", "Due rows at the last sweep, by lane.", []string{"lane"}, nil)
	descLateness  = prometheus.NewDesc("freshq_lateness_ratio", "Lateness ratio (now - due) / cadence at grant, by lane.", []string{"lane"}, nil)
	descRender    = prometheus.NewDesc("freshq_render_total", "Render attempts by outcome.", []string{"outcome"}, nil)
	descRenderSec = prometheus.NewDesc("freshq_render_seconds", "Render duration.", nil, nil)
	descRefused   = prometheus.NewDesc("freshq_lease_refused_total", "Takes refused at grant time because the row was leased, by cause.", []string{"cause"}, nil)
	descLeases    = prometheus.NewDesc("freshq_leases_live", "Live leases of rows (host slots are not counted).", nil, nil)
	// A timestamp in seconds, as Prometheus names them (promtool rejects an abbreviated unit such
	// as freshq_floor_ms).
	descFloor       = prometheus.NewDesc("freshq_floor_timestamp_seconds", "The claim floor, seconds since the epoch.", nil, nil)
	descPinned      = prometheus.NewDesc("freshq_floor_pinned_seconds", "How long the row at the floor's head has held it.", nil, nil)
	descBelow       = prometheus.NewDesc("freshq_below_floor", "Rows below the claim floor (must be 0).", nil, nil)
	descRestarts    = prometheus.NewDesc("freshq_worker_restarts_total", "Worker restarts.", []string{"worker"}, nil)
	descDropped     = prometheus.NewDesc("freshq_results_dropped_total", "Results given up after the delivery bound.", nil, nil)
	descGivenBack   = prometheus.NewDesc("freshq_leases_released_unrendered_total", "Leases a render worker gave back without a result when it stopped: claimed but not begun, or cancelled at the drain bound.", nil, nil)
	descResultLat   = prometheus.NewDesc("freshq_claim_to_result_seconds", "From claim to worker 0's commit of the result.", nil, nil)
	descChromeBlock = prometheus.NewDesc("freshq_chrome_blocked_requests_total", "Requests the chrome renderer refused before they loaded: by resource type, by URL pattern, or by policy (render.domains, the address policy, a scheme other than http(s)).", []string{"reason"}, nil)
	descChromeRest  = prometheus.NewDesc("freshq_chrome_restarts_total", "Browsers the chrome renderer retired for a new one: after render.chrome.recycle_after renders, over render.chrome.max_rss, or crashed.", []string{"reason"}, nil)
	descHeartbeat   = prometheus.NewDesc("freshq_worker_heartbeat_age_seconds", "Seconds since each worker's last heartbeat.", []string{"worker"}, nil)
	// The cluster (store.backend postgres): what the fence refused, counted in shared memory,
	// and this node's shards, the number from worker 0's block and each one from its cluster view.
	descGrantsFenced   = prometheus.NewDesc("freshq_grants_fenced_total", "Takes refused by the node's fence: their shard was given up, or its leases were not renewed in time.", nil, nil)
	descAdvancesFenced = prometheus.NewDesc("freshq_floor_advances_fenced_total", "Shard floor advances refused because the node no longer held the shard at its epoch.", nil, nil)
	descResultsFenced  = prometheus.NewDesc("freshq_results_fenced_total", "Results refused because the node no longer held the row's shard.", nil, nil)
	descShardsOwned    = prometheus.NewDesc("freshq_cluster_shards_owned", "Shards this node holds by lease.", nil, nil)
	descShardsMoved    = prometheus.NewDesc("freshq_cluster_shard_moves_total", "Shards this node acquired, and gave up (handed over or found lost).", []string{"direction"}, nil)
	descShardEpoch     = prometheus.NewDesc("freshq_shard_epoch", "The epoch of this node's lease of each shard it holds.", []string{"shard"}, nil)
	descShardFloor     = prometheus.NewDesc("freshq_shard_floor_timestamp_seconds", "The floor of each shard this node holds, seconds since the epoch.", []string{"shard"}, nil)
	descShardBelow     = prometheus.NewDesc("freshq_shard_rows_below_floor", "Rows due below the floor of each shard this node holds (must be 0; counted up to 1000 a shard).", []string{"shard"}, nil)
	laneNames          = []string{"urgent", "submitted", "discovered", "cold"}
	allDescriptions    = []*prometheus.Desc{descClaim, descSweep, descSweeps, descPublished, descReadyGen, descCadence, descBacklog,
		descLateness, descRender, descRenderSec, descRefused, descLeases, descFloor, descPinned, descBelow, descRestarts,
		descDropped, descGivenBack, descHeartbeat, descResultLat, descChromeBlock, descChromeRest,
		descGrantsFenced, descAdvancesFenced, descResultsFenced, descShardsOwned, descShardsMoved, descShardEpoch, descShardFloor, descShardBelow}
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescriptions {
		ch <- d
	}
	for _, d := range capacityDescriptions {
		ch <- d
	}
	for _, d := range missDescriptions {
		ch <- d
	}
	for _, d := range hostDescriptions {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	seg := c.s.seg
	now := clock.Now()
	workers := make([]*shm.Worker, len(c.s.children))
	for i := range workers {
		workers[i], _ = seg.Worker(i)
	}
	sum := func(ctr shm.Counter) float64 {
		t := uint64(0)
		for _, w := range workers {
			t += w.Load(ctr)
		}
		return float64(t)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	histogram := func(d *prometheus.Desc, base shm.Counter, bounds []float64, scale float64, labels ...string) {
		buckets := make(map[float64]uint64, len(bounds))
		cum := uint64(0)
		for i, b := range bounds {
			cum += uint64(sum(base + shm.Counter(i)))
			buckets[b] = cum
		}
		count := cum + uint64(sum(base+shm.Counter(len(bounds))))
		total := sum(base+shm.Counter(len(bounds)+1)) / scale
		ch <- prometheus.MustNewConstHistogram(d, count, total, buckets, labels...)
	}

	counter(descClaim, sum(shm.CounterClaimReady), "ready")
	counter(descClaim, sum(shm.CounterClaimIndex), "index")
	w0 := workers[0]
	gauge(descSweep, float64(w0.Load(shm.CounterSweepMicros))/1e6, "last")
	counter(descSweeps, float64(w0.Load(shm.CounterSweeps)), "ok")
	counter(descSweeps, float64(w0.Load(shm.CounterSweepFailures)), "failed")
	counter(descSweeps, float64(w0.Load(shm.CounterSweepCapped)), "capped")
	rs := seg.Ready().Stats()
	gauge(descPublished, float64(rs.Count))
	gauge(descReadyGen, float64(rs.Gen))
	counter(descCadence, float64(w0.Load(shm.CounterCadenceCarried)), "carried")
	counter(descCadence, float64(w0.Load(shm.CounterCadenceResolved)), "resolved")
	for lane, name := range laneNames {
		gauge(descBacklog, float64(w0.Load(shm.CounterBacklog+shm.Counter(lane))), name)
		histogram(descLateness, shm.CounterLateness+shm.Counter(lane)*shm.LatenessStride, shm.LatenessBuckets[:], 1e6, name)
	}
	for i, o := range outcome.All() {
		counter(descRender, sum(shm.CounterRenderOutcome+shm.Counter(i)), o.String())
	}
	histogram(descRenderSec, shm.CounterRenderSeconds, shm.RenderSecondsBuckets[:], 1e6)
	histogram(descResultLat, shm.CounterResultLatency, shm.ResultLatencyBuckets[:], 1e6)
	ls := seg.Leases().Stats(now.UnixMilli())
	counter(descRefused, float64(ls.RefusedHeld), "held")
	counter(descRefused, float64(ls.RefusedFull), "full")
	counter(descRefused, float64(ls.RefusedContended), "contended")
	gauge(descLeases, float64(ls.Live))
	floor := seg.Floor().Load()
	gauge(descFloor, float64(floor)/1000)
	pinned := 0.0
	if h, since := seg.Floor().Pin(); h != 0 && since > 0 {
		pinned = now.Sub(time.UnixMilli(since)).Seconds()
	}
	gauge(descPinned, pinned)
	gauge(descBelow, float64(w0.Load(shm.CounterBelowFloor)))
	counter(descDropped, sum(shm.CounterResultsDropped))
	counter(descGivenBack, sum(shm.CounterReleasedUnrendered))
	for i, reason := range shm.ChromeBlockReasons {
		counter(descChromeBlock, sum(shm.CounterChromeBlocked+shm.Counter(i)), reason)
	}
	for i, reason := range shm.ChromeRestartReasons {
		counter(descChromeRest, sum(shm.CounterChromeRestarts+shm.Counter(i)), reason)
	}
	for i, w := range workers {
		st := w.Status()
		idx := strconv.Itoa(i)
		counter(descRestarts, float64(st.Restarts), idx)
		age := 0.0
		if st.HeartbeatMs > 0 {
			age = now.Sub(time.UnixMilli(st.HeartbeatMs)).Seconds()
		}
		gauge(descHeartbeat, age, idx)
	}
	c.collectCluster(w0, sum, counter, gauge)
	c.collectCapacity(gauge)
	gauge(descMissFlights, float64(w0.Load(shm.CounterMissFlights)))
	gauge(descMissWaiters, float64(w0.Load(shm.CounterMissWaiters)))
	c.collectHosts(now.UnixMilli(), sum, counter, gauge)
}

// Render on miss (POST /v1/pages?wait=, the crawler listener's misses), from worker 0's block.
var (
	descMissFlights  = prometheus.NewDesc("freshq_render_on_miss_flights", "Renders on miss in flight: one per page that requests wait for.", nil, nil)
	descMissWaiters  = prometheus.NewDesc("freshq_render_on_miss_waiters", "Requests waiting for a render on miss (at most page.max_waiters).", nil, nil)
	missDescriptions = []*prometheus.Desc{descMissFlights, descMissWaiters}
)

// serveGatherer gathers worker 0's crawler-listener series (package serve) at a scrape, over
// the control socket. A worker 0 that does not answer leaves them out of that scrape (a
// missing series is honest, a stale one is not); they restart from zero with worker 0, as
// counters may.
func (s *supervisor) serveGatherer() prometheus.Gatherer {
	client := &http.Client{Timeout: capacityScrapeTimeout, Transport: &http.Transport{
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

// clusterScrapeTimeout bounds the read of worker 0's cluster view at a scrape: a database that
// does not answer leaves the shard series out of this scrape, not /metrics hanging.
const clusterScrapeTimeout = time.Second

// collectCluster exports the cluster's series on PostgreSQL (nothing on Badger, whose node is in
// no cluster). The fence's refusals and the number of shards held are worker 0's and the render
// workers' counters in shared memory, there while worker 0 restarts. Each shard's epoch, floor
// and rows below it live only in the database: they are read from worker 0's cluster view at
// the scrape, for the leases the node holds unexpired, and left out of a scrape during which
// worker 0 or the database does not answer (a missing series is honest, a stale one is not).
func (c *collector) collectCluster(w0 *shm.Worker, sum func(shm.Counter) float64, counter, gauge func(*prometheus.Desc, float64, ...string)) {
	if c.s.cfg.Load().Store.Backend != config.StoreBackendPostgres {
		return
	}
	counter(descGrantsFenced, sum(shm.CounterGrantsFenced))
	counter(descAdvancesFenced, float64(w0.Load(shm.CounterAdvancesFenced)))
	counter(descResultsFenced, float64(w0.Load(shm.CounterResultsFenced)))
	gauge(descShardsOwned, float64(w0.Load(shm.CounterShardsOwned)))
	counter(descShardsMoved, float64(w0.Load(shm.CounterShardsAcquired)), "acquired")
	counter(descShardsMoved, float64(w0.Load(shm.CounterShardsLost)), "lost")
	ctx, cancel := context.WithTimeout(context.Background(), clusterScrapeTimeout)
	defer cancel()
	v, err := c.s.status.Cluster(ctx)
	if err != nil {
		return
	}
	for _, sh := range v.Shards {
		if sh.Owner != v.Self || sh.ExpiresAtMs <= v.NowMs {
			continue
		}
		label := strconv.Itoa(sh.Shard)
		gauge(descShardEpoch, float64(sh.Epoch), label)
		gauge(descShardFloor, float64(sh.FloorMs)/1000, label)
		gauge(descShardBelow, float64(sh.RowsBelowFloor), label)
	}
}

// The capacity series: worker 0's demand, measured capacity and projection (package capacity).
var (
	descDemand    = prometheus.NewDesc("freshq_demand_renders_per_second", "Renders per second the schedule asks for (Σ 1/cadence over live rows), by lane.", []string{"lane"}, nil)
	descCapacity  = prometheus.NewDesc("freshq_capacity_renders_per_second", "Renders completed per second, smoothed over 15 minutes.", nil, nil)
	descProjected = prometheus.NewDesc("freshq_projected_lateness_ratio", "Projected steady-state age ÷ cadence at render, by lane (1 = on time).", []string{"lane"}, nil)

	capacityDescriptions = []*prometheus.Desc{descDemand, descCapacity, descProjected}
)

// capacityScrapeTimeout bounds the read of worker 0's capacity view at a scrape.
const capacityScrapeTimeout = time.Second

// collectCapacity exports the capacity series from worker 0's capacity view, read over the
// control socket at the scrape. A worker 0 that does not answer leaves them out of this scrape
// (a missing series is honest, a stale one is not).
func (c *collector) collectCapacity(gauge func(*prometheus.Desc, float64, ...string)) {
	ctx, cancel := context.WithTimeout(context.Background(), capacityScrapeTimeout)
	defer cancel()
	v, err := c.s.status.Capacity(ctx)
	if err != nil {
		return
	}
	for _, lane := range laneNames {
		gauge(descDemand, v.Demand.ByLane[lane], lane)
		if r, ok := v.Projection.ByLane[lane]; ok {
			gauge(descProjected, r, lane)
		}
	}
	gauge(descCapacity, v.Capacity.PerSecond)
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
