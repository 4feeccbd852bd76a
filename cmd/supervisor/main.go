// Command freshq-supervisor runs freshq: it creates the shared-memory segment, forks the
// workers, restarts them when they die, and serves the public HTTP listener (/metrics, /healthz
// and /readyz from shared memory; everything else proxied to worker 0). It is meant to run
// under systemd (Type=notify; see deploy/freshq.service).
//
//	freshq-supervisor --config /etc/freshq/freshq.yaml [--data-dir DIR] [--listen ADDR] [--workers N]
//
// Signals: SIGTERM/SIGINT drain the workers and exit 0; SIGHUP reloads and validates the
// configuration and passes it to every worker (a bad file is refused and logged, the running
// configuration stays); SIGUSR2 hands the listening sockets over to the binary now at this
// executable's path, which takes over while this supervisor stops (an upgrade without systemd;
// see listeners.go). Under systemd the sockets may come from the socket units
// (deploy/freshq-admin.socket, deploy/freshq-crawler.socket), which keep them open across
// restarts.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/console"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/internal/connguard"
	"github.com/freshq/freshq/internal/logging"
	"github.com/freshq/freshq/internal/testhold"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/shm/shmmetrics"
	"github.com/freshq/freshq/wire"
)

// ExitIntensity is the exit code when workers restart more often than restart_intensity within
// restart_period: systemd's own restart policy takes over from there.
const ExitIntensity = 3

type overrides struct {
	dataDir, listen string
	workers         int
}

func (o overrides) apply(c *config.Config) {
	if o.dataDir != "" {
		c.DataDir = o.dataDir
	}
	if o.listen != "" {
		c.Listen = o.listen
	}
	if o.workers > 0 {
		c.Workers = o.workers
	}
}

func main() {
	// Handlers first thing: a SIGHUP (or SIGTERM) that arrives while the process starts waits in
	// the channel for the main loop, instead of taking its default action, which kills.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR2)
	testhold.Hold()
	os.Exit(run(os.Args[1:], sigs))
}

func run(args []string, sigs <-chan os.Signal) int {
	fs := flag.NewFlagSet("freshq-supervisor", flag.ContinueOnError)
	configPath := fs.String("config", "", "configuration file (required)")
	var ov overrides
	fs.StringVar(&ov.dataDir, "data-dir", "", "override data_dir")
	fs.StringVar(&ov.listen, "listen", "", "override listen")
	fs.IntVar(&ov.workers, "workers", 0, "override workers")
	workerBin := fs.String("worker-bin", "", "the worker binary (default: freshq-worker next to this executable)")
	logFormat := fs.String("log-format", "json", "json or console")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := newLogger(*logFormat)
	if *configPath == "" {
		log.Error().Msg("--config is required")
		return 2
	}
	rt := runtimeDir()
	load := loader{path: *configPath, ov: ov, rt: rt}.load
	cfg, data, err := load()
	if err != nil {
		log.Error().Err(err).Msg("configuration")
		return 2
	}
	logging.SetLevel(cfg.Log.Level)
	if cfg.Workers < 2 {
		log.Warn().Int("workers", cfg.Workers).Msg("with fewer than 2 workers nothing renders locally; only remote renderers will")
	}
	bin := *workerBin
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			log.Error().Err(err).Msg("locating the worker binary")
			return 2
		}
		bin = filepath.Join(filepath.Dir(self), "freshq-worker")
	}
	if _, err := os.Stat(bin); err != nil {
		log.Error().Err(err).Msg("worker binary")
		return 2
	}
	sockets, err := inheritSockets()
	if err == nil {
		err = sockets.check(cfg)
	}
	if err != nil {
		log.Error().Err(err).Msg("inherited sockets")
		return 2
	}
	// A supervisor that takes over waits for the old one's locks: the old one stops once told.
	acquire := acquireLock
	if sockets.from == "handover" {
		acquire = func(path string) (*lock, error) { return acquireLockWaiting(path, handoverWait(cfg)) }
		log.Info().Dur("wait", handoverWait(cfg)).Msg("taking over: waiting for the supervisor that handed over to stop")
		sockets.confirm()
	}

	// Ownership before anything else is touched: a second supervisor on this data directory or
	// segment stops here, leaving the first one's files alone.
	if err := ensurePrivateDir(rt); err != nil {
		log.Error().Err(err).Msg("runtime directory")
		return 1
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		log.Error().Err(err).Msg("data dir")
		return 1
	}
	dataLock, err := acquire(filepath.Join(cfg.DataDir, "supervisor.lock"))
	if err != nil {
		log.Error().Err(err).Str("data_dir", cfg.DataDir).Msg("data_dir is in use by another freshq supervisor; refusing to start")
		return 1
	}
	defer dataLock.release()
	segLock, err := acquire(cfg.SHM.Path + ".lock")
	if err != nil {
		log.Error().Err(err).Str("shm", cfg.SHM.Path).Msg("shm.path is in use by another freshq supervisor; refusing to start")
		return 1
	}
	defer segLock.release()
	name := poolName(cfg.DataDir)
	socket := filepath.Join(rt, name+".sock")
	if len(socket) > maxSocketPath {
		log.Error().Str("socket", socket).Msg("the control socket's path is longer than a unix socket address holds; use a shorter RUNTIME_DIRECTORY")
		return 2
	}
	opts := shm.Options{
		ReadyCapacity: cfg.Queue.Ready.Capacity,
		KeyCapacity:   cfg.Queue.Ready.KeyCapacity,
		LeaseCapacity: cfg.Queue.MaxLeases,
		Workers:       cfg.Workers,
	}
	if err := checkSegmentSpace(cfg, opts, data); err != nil {
		log.Error().Err(fmt.Errorf("%s: %w", *configPath, err)).Msg("configuration")
		return 2
	}
	seg, err := shm.Create(cfg.SHM.Path, opts)
	if err != nil {
		log.Error().Err(err).Msg("creating the shared-memory segment")
		return 1
	}
	segID, err := statID(cfg.SHM.Path)
	if err != nil {
		seg.Close()
		log.Error().Err(err).Msg("creating the shared-memory segment")
		return 1
	}
	defer func() {
		seg.Close()
		if !removeIfSame(cfg.SHM.Path, segID) {
			log.Warn().Str("shm", cfg.SHM.Path).Msg("the segment file is not the one this supervisor created; left in place")
		}
	}()
	if !cfg.ReadyEnabled() {
		seg.Ready().SetEnabled(false)
	}
	workerConfig := filepath.Join(rt, name+".yaml")
	if err := writePrivate(workerConfig, data); err != nil {
		log.Error().Err(err).Msg("writing the workers' configuration")
		return 1
	}
	defer os.Remove(workerConfig)

	s := &supervisor{
		log: log, seg: seg, bin: bin, workerConfig: workerConfig, logFormat: *logFormat, socket: socket, sockets: sockets,
	}
	s.cfg.Store(cfg)
	s.status = wire.NewClient(s.socket)
	if s.metrics, err = shmmetrics.New(shmmetrics.Options{
		Segment:   seg,
		Workers:   cfg.Workers,
		Clustered: func() bool { return s.cfg.Load().Store.Backend == config.StoreBackendPostgres },
		HostLimits: func() hosts.Limits {
			c := s.cfg.Load()
			return assemble.HostsLimits(c.Render.Hosts, c.Render.Domains...)
		},
		Worker0: s.status,
	}); err != nil {
		log.Error().Err(err).Msg("metrics")
		return 1
	}
	return s.run(load, sigs)
}

// loader reads, validates and resolves the configuration file: the same checks run at start
// and on every reload. load returns the file's bytes too: they are what the workers get.
type loader struct {
	path string
	ov   overrides
	rt   string // the runtime directory, for a defaulted shm.path
}

func (l loader) load() (*config.Config, []byte, error) {
	data, err := os.ReadFile(l.path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	c, err := config.Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", l.path, err)
	}
	if tok := os.Getenv("FRESHQ_TOKEN"); tok != "" {
		c.Token = tok // a secret is better kept out of a file that gets copied around
	}
	l.ov.apply(c)
	if err := resolvePaths(c, l.rt); err != nil {
		return nil, nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", l.path, err)
	}
	if err := checkToken(c, data); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", l.path, err)
	}
	return c, data, nil
}

// checkToken refuses a listener beyond loopback without a bearer token, at start and on every
// reload: a reload must not turn authentication off.
func checkToken(c *config.Config, data []byte) error {
	if loopbackOnly(c.Listen) || c.Token != "" {
		return nil
	}
	return &config.FieldError{Path: "token", Line: config.LineOf(data, "token"),
		Msg: fmt.Sprintf("listening beyond loopback (%s) requires a bearer token (token in the config or FRESHQ_TOKEN)", c.Listen)}
}

// writePrivate replaces path with data, mode 0600, atomically: a worker starting meanwhile
// reads the old configuration or the new one, never half of one.
func writePrivate(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".freshq-config-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func newLogger(format string) zerolog.Logger {
	return logging.New(format).With().Str("role", "supervisor").Logger()
}

type supervisor struct {
	log          zerolog.Logger
	seg          *shm.Segment
	bin          string
	workerConfig string // the configuration in force, as the workers read it (runtime directory, 0600)
	logFormat    string
	socket       string
	status       *wire.Client // worker 0's status, for /readyz and systemd; one client, kept-alive connections
	cfg          atomic.Pointer[config.Config]
	children     []*child
	stopping     atomic.Bool     // the stop began: render workers stop and are not restarted
	closing      atomic.Bool     // worker 0 was told to stop: it is not restarted either
	waits        waitStop        // closed when the stop begins: requests waiting for a render on miss end
	fatal        chan error      // a restart storm
	serveFile    *os.File        // the crawler listener's socket (serve.listen), handed to worker 0; nil: off
	adminFile    *os.File        // the admin listener's socket (listen), for a handover
	drain        connguard.Drain // the admin listener's stop
	sockets      inheritedSockets
	console      *console.Console // the console at /ui/ (consoleHandler)
	series       *console.Ring    // the overview's series: one sample a minute (sampleSeries)
	metrics      prometheus.Collector
}

// run starts everything and blocks until a signal or a restart storm ends it.
func (s *supervisor) run(load func() (*config.Config, []byte, error), sigs <-chan os.Signal) int {
	cfg := s.cfg.Load()
	s.fatal = make(chan error, 1)
	s.series = console.NewRing()
	// Each socket is inherited (systemd's, or a handover's) or bound here (listeners.go).
	ln, adminFile, err := s.sockets.listenAdmin(cfg.Listen)
	if err != nil {
		s.log.Error().Err(err).Str("listen", cfg.Listen).Msg("listen")
		return 1
	}
	s.adminFile = adminFile
	// The crawler listener is bound here, once, and served by worker 0 (package serve): the
	// socket outlives a restart of worker 0, whose connections wait in the accept queue.
	if cfg.Serve.Listen != "" {
		var addr net.Addr
		s.serveFile, addr, err = s.sockets.listenCrawler(cfg.Serve.Listen)
		if err != nil {
			s.log.Error().Err(err).Str("serve.listen", cfg.Serve.Listen).Msg("listen")
			return 1
		}
		s.log.Info().Str("serve", addr.String()).Str("inherited_from", s.sockets.from).Msg("crawler listener bound; worker 0 serves it")
	}
	srv, ln := s.publicServer(ln) // timeouts and http.max_conns (http.go)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Msg("public listener stopped")
		}
	}()
	s.log.Info().Str("listen", ln.Addr().String()).Int("workers", cfg.Workers).Str("data_dir", cfg.DataDir).
		Str("shm", cfg.SHM.Path).Str("socket", s.socket).Str("inherited_from", s.sockets.from).Msg("freshq supervisor started")

	restarts := newIntensity(cfg.Supervisor.RestartIntensity, cfg.Supervisor.RestartPeriod.D())
	for i := range cfg.Workers {
		c := &child{index: i, s: s, restarts: restarts}
		s.children = append(s.children, c)
		c.start()
	}
	go s.notifySystemd()
	go s.sampleSeries()

	code := 0
loop:
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				s.reload(load)
				continue
			}
			if sig == syscall.SIGUSR2 {
				pid, err := s.handOver()
				if err != nil {
					s.log.Error().Err(err).Msg("handover refused; this supervisor keeps serving")
					continue
				}
				s.log.Info().Int("new_pid", pid).Msg("handed the listeners over; draining")
				break loop
			}
			s.log.Info().Str("signal", sig.String()).Msg("draining")
			break loop
		case err := <-s.fatal:
			s.log.Error().Err(err).Msg("restart intensity exceeded; stopping so that systemd's policy takes over")
			code = ExitIntensity
			break loop
		}
	}
	start := time.Now()
	s.stopping.Store(true)
	s.waits.stop()
	notify("STOPPING=1")
	killed := s.stopChildren(s.cfg.Load().Supervisor.ShutdownTimeout.D(), func() {
		s.drain.Stop(srv, listenerDrainGrace, listenerDrainBound)
	})
	s.log.Info().Int("exit", code).Int("killed", killed).Dur("took", time.Since(start)).Msg("freshq supervisor stopped")
	return code
}

// reload validates the file as at start, refuses a change of a restart-only key, and only then
// makes it the configuration in force: the workers' copy is replaced and they are told to reread
// it (SIGHUP), and the kill switch is applied to shared memory at once. A refused reload reaches
// no worker, and a worker restarted later gets the configuration in force, not the file.
func (s *supervisor) reload(load func() (*config.Config, []byte, error)) {
	cfg, data, err := load()
	if err == nil {
		err = config.CheckReload(s.cfg.Load(), cfg, data)
	}
	if err == nil {
		err = writePrivate(s.workerConfig, data)
	}
	if err != nil {
		s.log.Error().Err(err).Msg("reload refused; the running configuration stays in force")
		return
	}
	s.cfg.Store(cfg)
	logging.SetLevel(cfg.Log.Level)
	s.seg.Ready().SetEnabled(cfg.ReadyEnabled())
	for _, c := range s.children {
		c.signal(syscall.SIGHUP)
	}
	s.log.Info().Bool("ready_enabled", cfg.ReadyEnabled()).Str("log_level", cfg.Log.Level).Msg("configuration reloaded")
	s.log.Debug().Str("log_level", cfg.Log.Level).Msg("debug lines logged")
}

// flushMargin is how long past the drain bound a render worker has to deliver its last results
// (it gives up on worker 0 5 s past it, at the worker's renderFlushTimeout), and worker 0 to
// finish its cut requests and sitemap runs (3 s, its finishTimeout) and close Badger.
const flushMargin = 10 * time.Second

// stopChildren stops the pool in order, so that no result is lost: the render workers first
// (SIGTERM: they stop claiming, finish or cancel their renders within drain, and deliver every
// result to worker 0, which is still serving, and restarted should it crash meanwhile), then
// the public listener (stopListener), then worker 0 (final commit, Badger closed). A worker
// still running past its bound is killed; it returns how many were.
func (s *supervisor) stopChildren(drain time.Duration, stopListener func()) int {
	killed := 0
	wait := func(cs []*child, bound time.Duration) {
		deadline := time.Now().Add(bound)
		for _, c := range cs {
			t := time.NewTimer(time.Until(deadline))
			select {
			case <-c.exited():
				t.Stop()
			case <-t.C:
				s.log.Warn().Int("worker", c.index).Dur("bound", bound).Msg("worker did not stop within its bound; killing it")
				c.signal(syscall.SIGKILL)
				<-c.exited()
				killed++
			}
		}
	}
	if len(s.children) > 1 {
		for _, c := range s.children[1:] {
			c.signal(syscall.SIGTERM)
		}
		wait(s.children[1:], drain+flushMargin)
	}
	stopListener()
	s.closing.Store(true) // before the signal: a worker 0 restarting now is not launched
	if len(s.children) > 0 {
		s.children[0].signal(syscall.SIGTERM)
		wait(s.children[:1], drain+flushMargin)
	}
	return killed
}
