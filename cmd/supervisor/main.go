// Command freshq-supervisor runs freshq: it creates the shared-memory segment, forks the
// workers, restarts them when they die, and serves the public HTTP listener (/metrics, /healthz
// and /readyz from shared memory; everything else proxied to worker 0). It is meant to run
// under systemd (Type=notify; see deploy/freshq.service).
//
//	freshq-supervisor --config /etc/freshq/freshq.yaml [--data-dir DIR] [--listen ADDR] [--workers N]
//
// Signals: SIGTERM/SIGINT drain the workers and exit 0; SIGHUP reloads and validates the
// configuration and passes it to every worker (a bad file is refused and logged, the running
// configuration stays).
package main

import (
	"context"
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

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/internal/logging"
	"github.com/freshq/freshq/shm"
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
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
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
	load := func() (*config.Config, error) {
		c, err := config.Load(*configPath)
		if err != nil {
			return nil, err
		}
		ov.apply(c)
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", *configPath, err)
		}
		return c, nil
	}
	cfg, err := load()
	if err != nil {
		log.Error().Err(err).Msg("configuration")
		return 2
	}
	log = logging.WithLevel(log, cfg.Log.Level)
	if !loopbackOnly(cfg.Listen) && cfg.Token == "" {
		log.Error().Str("listen", cfg.Listen).Msg("listening beyond loopback requires a bearer token (token in the config or FRESHQ_TOKEN)")
		return 2
	}
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
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		log.Error().Err(err).Msg("data dir")
		return 1
	}
	seg, err := shm.Create(cfg.SHM.Path, shm.Options{
		ReadyCapacity: cfg.Queue.Ready.Capacity,
		KeyCapacity:   cfg.Queue.Ready.KeyCapacity,
		LeaseCapacity: cfg.Queue.MaxLeases,
		Workers:       cfg.Workers,
	})
	if err != nil {
		log.Error().Err(err).Msg("creating the shared-memory segment")
		return 1
	}
	defer func() {
		seg.Close()
		os.Remove(cfg.SHM.Path)
	}()
	if !cfg.ReadyEnabled() {
		seg.Ready().SetEnabled(false)
	}

	s := &supervisor{
		log: log, seg: seg, bin: bin, configPath: *configPath, ov: ov, logFormat: *logFormat,
		socket: filepath.Join(cfg.DataDir, "worker0.sock"),
	}
	s.cfg.Store(cfg)
	return s.run(load)
}

func newLogger(format string) zerolog.Logger {
	return logging.New(format).With().Str("role", "supervisor").Logger()
}

type supervisor struct {
	log        zerolog.Logger
	seg        *shm.Segment
	bin        string
	configPath string
	ov         overrides
	logFormat  string
	socket     string
	cfg        atomic.Pointer[config.Config]
	children   []*child
	stopping   atomic.Bool
	fatal      chan error // a restart storm
}

// run starts everything and blocks until a signal or a restart storm ends it.
func (s *supervisor) run(load func() (*config.Config, error)) int {
	cfg := s.cfg.Load()
	s.fatal = make(chan error, 1)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		s.log.Error().Err(err).Str("listen", cfg.Listen).Msg("listen")
		return 1
	}
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Msg("public listener stopped")
		}
	}()
	s.log.Info().Str("listen", ln.Addr().String()).Int("workers", cfg.Workers).Str("data_dir", cfg.DataDir).
		Str("shm", cfg.SHM.Path).Msg("freshq supervisor started")

	restarts := newIntensity(cfg.Supervisor.RestartIntensity, cfg.Supervisor.RestartPeriod.D())
	for i := range cfg.Workers {
		c := &child{index: i, s: s, restarts: restarts}
		s.children = append(s.children, c)
		c.start()
	}
	go s.notifySystemd()

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	code := 0
loop:
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				s.reload(load)
				continue
			}
			s.log.Info().Str("signal", sig.String()).Msg("draining")
			break loop
		case err := <-s.fatal:
			s.log.Error().Err(err).Msg("restart intensity exceeded; stopping so that systemd's policy takes over")
			code = ExitIntensity
			break loop
		}
	}
	s.stopping.Store(true)
	notify("STOPPING=1")
	s.stopChildren(s.cfg.Load().Supervisor.ShutdownTimeout.D())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	s.log.Info().Int("exit", code).Msg("freshq supervisor stopped")
	return code
}

// reload validates the file; a good one reaches every worker (they reload it themselves on
// SIGHUP) and the kill switch is applied to shared memory at once.
func (s *supervisor) reload(load func() (*config.Config, error)) {
	cfg, err := load()
	if err != nil {
		s.log.Error().Err(err).Msg("reload refused; the running configuration stays in force")
		return
	}
	old := s.cfg.Load()
	if cfg.Workers != old.Workers || cfg.Listen != old.Listen || cfg.DataDir != old.DataDir || cfg.SHM.Path != old.SHM.Path {
		s.log.Warn().Msg("workers, listen, data_dir and shm.path change only on restart; the rest is reloaded")
	}
	s.cfg.Store(cfg)
	s.seg.Ready().SetEnabled(cfg.ReadyEnabled())
	for _, c := range s.children {
		c.signal(syscall.SIGHUP)
	}
	s.log.Info().Bool("ready_enabled", cfg.ReadyEnabled()).Msg("configuration reloaded")
}

// stopChildren sends SIGTERM to every worker, waits up to drain (plus a margin for worker 0 to
// close Badger) and kills what is left.
func (s *supervisor) stopChildren(drain time.Duration) {
	for _, c := range s.children {
		c.signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(drain + 5*time.Second)
	for _, c := range s.children {
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-c.exited():
			t.Stop()
		case <-t.C:
			s.log.Warn().Int("worker", c.index).Msg("worker did not stop within the drain bound; killing it")
			c.signal(syscall.SIGKILL)
			<-c.exited()
		}
	}
}
