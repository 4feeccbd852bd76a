package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"

	"github.com/freshq/freshq/crawlers"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/connguard"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/serve"
)

// crawlerListener is worker 0's crawler listener (serve.listen) as a service: package serve's
// handler on the socket the supervisor listens on and hands down as -serve-fd. Worker 0 serves
// it itself because Badger is open here alone: a hit is two reads of the store from the
// request, with no proxy hop and no queue behind worker 0's writes (reads are snapshots).
type crawlerListener struct {
	e       *env
	reg     *prometheus.Registry
	targets *intake.Targets
	misses  *misses.Flights
	demand  *intake.Demand      // writes the counted requests into the targets
	tally   *crawlers.Tally     // what each crawler family got, for /v1/queue
	pages   *crawlers.PageTally // the same per page, for GET /v1/targets/crawlers

	h       *serve.Handler
	srv     *http.Server
	drain   connguard.Drain // the socket outlives this worker 0: Stop answers what it accepted
	flushes chan struct{}   // closed to stop the demand flushes
	flushed chan struct{}   // closed when they have stopped
}

// demandHalfLife is the half-life of the crawler request counts worker 0 keeps (serve.Demand);
// serve.demand_bytes bounds their memory.
const demandHalfLife = time.Hour

// Start serves the inherited socket until Stop.
func (c *crawlerListener) Start(ctx context.Context) error {
	f := os.NewFile(uintptr(c.e.serveFD), "serve.listen")
	ln, err := net.FileListener(f)
	f.Close() // FileListener holds its own copy
	if err != nil {
		return err
	}
	cfg := c.e.cur.Load().Config()
	// serve.verify.* are read here, once: the verdicts' cache lives as long as the listener.
	verifier := crawlers.NewVerifier(crawlers.SystemResolver(), crawlers.Options{Timeout: cfg.Serve.Verify.Timeout.D(),
		Concurrency: cfg.Serve.Verify.Concurrency, CacheEntries: cfg.Serve.Verify.CacheEntries, CacheTTL: cfg.Serve.Verify.CacheTTL.D()}, nil)
	c.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "freshq_serve_verify_cache_entries",
		Help: "Crawler verification verdicts cached, at most serve.verify.cache_entries."}, func() float64 { return float64(verifier.Len()) }))
	for _, outcome := range crawlers.Outcomes {
		c.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "freshq_serve_verify_lookups_total",
			Help:        "Crawler verifications that asked DNS, by outcome: answered, timeout (serve.verify.timeout passed first), failed, no_slot (serve.verify.concurrency busy throughout).",
			ConstLabels: prometheus.Labels{"outcome": outcome}}, func() float64 { return float64(verifier.Lookups()[outcome]) }))
	}
	c.h, err = serve.NewHandler(serve.HandlerDeps{Targets: c.targets, Misses: c.misses, Settings: c.e.serveSettings, Now: c.e.now, Log: c.e.log,
		Metrics: serve.NewMetrics(c.reg), Demand: &serve.Demand{HalfLifeMs: demandHalfLife.Milliseconds(), MaxBytes: int64(cfg.Serve.DemandBytes)},
		AdminToken: func() string { return c.e.cur.Load().Config().Token },
		Verifier:   verifier, Tally: c.tally, Pages: c.pages})
	if err != nil {
		ln.Close()
		return err
	}
	c.h.Start(ctx)
	c.flushes, c.flushed = make(chan struct{}), make(chan struct{})
	go c.flushDemand(cfg.Freshness.DemandFlush.D())
	h := cfg.HTTP
	c.srv = &http.Server{
		ConnContext:       connguard.ConnContext,
		ConnState:         c.drain.ConnState,
		Handler:           c.drain.Handler(c.h),
		ReadHeaderTimeout: h.ReadHeaderTimeout.D(),
		ReadTimeout:       h.ReadTimeout.D(),
		// A miss is answered within serve.wait: the answer may take that long to start.
		WriteTimeout:   max(h.WriteTimeout.D(), cfg.Serve.Wait.D()+h.WriteTimeout.D()),
		IdleTimeout:    h.IdleTimeout.D(),
		MaxHeaderBytes: 64 << 10,
	}
	// Tokenless peers hold at most http.max_unauthenticated of the http.max_conns slots
	// (connguard), outside the limit so that a connection it closes frees its slot at once.
	lim := c.drain.Listener(connguard.Listen(netutil.LimitListener(ln, h.MaxConns), h.MaxUnauthenticated,
		func() bool { return len(c.e.serveSettings().Tokens) > 0 }))
	go func() {
		if err := c.srv.Serve(lim); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.e.log.Error().Err(err).Msg("crawler listener stopped")
		}
	}()
	c.e.log.Info().Str("serve", ln.Addr().String()).Msg("crawler listener serving")
	return nil
}

// The crawler listener's drain (connguard.Drain): connections open get drainGrace to send one
// more request or close, then the requests still in flight get drainBound.
const (
	drainGrace = 2 * time.Second
	drainBound = 3 * time.Second
)

// Stop stops serving and leaves the socket to whoever holds it next: the supervisor's next
// worker 0, or the next supervisor's (systemd's socket or a handover), while the kernel queues
// the connections meanwhile. Nothing accepted goes unanswered: the listener stops accepting,
// the requests in flight are answered (their waits for a render on miss were ended by the
// Misses' stop) with Connection: close, and idle keep-alive connections get drainGrace before
// they are closed (connguard.Drain).
func (c *crawlerListener) Stop() {
	if c.srv == nil {
		return
	}
	c.drain.Stop(c.srv, drainGrace, drainBound)
	c.h.Stop()
	close(c.flushes)
	<-c.flushed
}

// flushDemand writes the crawler requests counted since the last flush into their targets
// every period (freshness.demand_flush, as configured at start), and once more when the
// listener stops, so that a stop loses none; what the store refused is given back to the next.
func (c *crawlerListener) flushDemand(period time.Duration) {
	defer close(c.flushed)
	t := time.NewTicker(period)
	defer t.Stop()
	flush := func() {
		counts := c.h.Demand().Take()
		if c.demand == nil {
			return
		}
		// Written even when empty: a flush starts the time the next one's counts cover, which
		// a page counted for the first time takes its rate over (intake.Demand.Write).
		n, left, err := c.demand.Write(counts)
		if err != nil {
			c.h.Demand().Return(left)
			c.e.log.Warn().Err(err).Int("written", n).Msg("crawler requests not written; retried with the next flush")
		}
	}
	for {
		select {
		case <-t.C:
			flush()
		case <-c.flushes:
			flush()
			return
		}
	}
}
