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
// see package supervise/listeners). Under systemd the sockets may come from the socket units
// (deploy/freshq-admin.socket, deploy/freshq-crawler.socket), which keep them open across
// restarts.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/internal/logging"
	"github.com/freshq/freshq/internal/testhold"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/supervise/admin"
	"github.com/freshq/freshq/supervise/listeners"
	"github.com/freshq/freshq/supervise/rundir"
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

// flags are the command line's.
type flags struct {
	configPath, workerBin, logFormat string
	ov                               overrides
}

func parseFlags(args []string) (flags, bool) {
	var f flags
	fs := flag.NewFlagSet("freshq-supervisor", flag.ContinueOnError)
	fs.StringVar(&f.configPath, "config", "", "configuration file (required)")
	fs.StringVar(&f.ov.dataDir, "data-dir", "", "override data_dir")
	fs.StringVar(&f.ov.listen, "listen", "", "override listen")
	fs.IntVar(&f.ov.workers, "workers", 0, "override workers")
	fs.StringVar(&f.workerBin, "worker-bin", "", "the worker binary (default: freshq-worker next to this executable)")
	fs.StringVar(&f.logFormat, "log-format", "json", "json or console")
	return f, fs.Parse(args) == nil
}

func run(args []string, sigs <-chan os.Signal) int {
	f, ok := parseFlags(args)
	if !ok {
		return 2
	}
	log := newLogger(f.logFormat)
	if f.configPath == "" {
		log.Error().Msg("--config is required")
		return 2
	}
	rt := rundir.Dir()
	load := loader{path: f.configPath, ov: f.ov, rt: rt}.load
	cfg, data, err := load()
	if err != nil {
		log.Error().Err(err).Msg("configuration")
		return 2
	}
	logging.SetLevel(cfg.Log.Level)
	if cfg.Workers < 2 {
		log.Warn().Int("workers", cfg.Workers).Msg("with fewer than 2 workers nothing renders locally; only remote renderers will")
	}
	bin := f.workerBin
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
	sockets, err := listeners.Inherit()
	if err == nil {
		err = sockets.Check(cfg.Listen, cfg.Serve.Listen)
	}
	if err != nil {
		log.Error().Err(err).Msg("inherited sockets")
		return 2
	}
	// A supervisor that takes over waits for the old one's locks: the old one stops once told.
	acquire := rundir.AcquireLock
	if sockets.From == "handover" {
		acquire = func(path string) (*rundir.Lock, error) { return rundir.AcquireLockWaiting(path, handoverWait(cfg)) }
		log.Info().Dur("wait", handoverWait(cfg)).Msg("taking over: waiting for the supervisor that handed over to stop")
		sockets.Confirm()
	}
	s := &supervisor{log: log, bin: bin, logFormat: f.logFormat, sockets: sockets}
	s.cfg.Store(cfg)
	return s.own(rt, f.configPath, data, acquire, func() int { return s.run(load, sigs) })
}

// own takes the pool's files (the locks, the runtime directory, the segment and the workers'
// configuration), runs serve, and gives them back. Ownership comes before anything else is
// touched: a second supervisor on this data directory or segment stops here, leaving the first
// one's files alone.
func (s *supervisor) own(rt, configPath string, data []byte, acquire func(string) (*rundir.Lock, error), serve func() int) int {
	log, cfg := s.log, s.cfg.Load()
	if err := rundir.EnsurePrivateDir(rt); err != nil {
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
	defer dataLock.Release()
	segLock, err := acquire(cfg.SHM.Path + ".lock")
	if err != nil {
		log.Error().Err(err).Str("shm", cfg.SHM.Path).Msg("shm.path is in use by another freshq supervisor; refusing to start")
		return 1
	}
	defer segLock.Release()
	name := rundir.PoolName(cfg.DataDir)
	s.socket = filepath.Join(rt, name+".sock")
	if len(s.socket) > rundir.MaxSocketPath {
		log.Error().Str("socket", s.socket).Msg("the control socket's path is longer than a unix socket address holds; use a shorter RUNTIME_DIRECTORY")
		return 2
	}
	opts := shm.Options{
		ReadyCapacity: cfg.Queue.Ready.Capacity,
		KeyCapacity:   cfg.Queue.Ready.KeyCapacity,
		LeaseCapacity: cfg.Queue.MaxLeases,
		Workers:       cfg.Workers,
	}
	if err := checkSegmentSpace(cfg, opts, data); err != nil {
		log.Error().Err(fmt.Errorf("%s: %w", configPath, err)).Msg("configuration")
		return 2
	}
	seg, err := shm.Create(cfg.SHM.Path, opts)
	if err != nil {
		log.Error().Err(err).Msg("creating the shared-memory segment")
		return 1
	}
	segID, err := rundir.StatID(cfg.SHM.Path)
	if err != nil {
		seg.Close()
		log.Error().Err(err).Msg("creating the shared-memory segment")
		return 1
	}
	defer func() {
		seg.Close()
		if !rundir.RemoveIfSame(cfg.SHM.Path, segID) {
			log.Warn().Str("shm", cfg.SHM.Path).Msg("the segment file is not the one this supervisor created; left in place")
		}
	}()
	if !cfg.ReadyEnabled() {
		seg.Ready().SetEnabled(false)
	}
	s.seg = seg
	s.workerConfig = filepath.Join(rt, name+".yaml")
	if err := writePrivate(s.workerConfig, data); err != nil {
		log.Error().Err(err).Msg("writing the workers' configuration")
		return 1
	}
	defer os.Remove(s.workerConfig)
	return serve()
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
	if admin.LoopbackOnly(c.Listen) || c.Token != "" {
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
