package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/internal/logging"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/shmmetrics"
	"github.com/freshq/freshq/supervise/admin"
	"github.com/freshq/freshq/supervise/listeners"
	"github.com/freshq/freshq/supervise/pool"
	"github.com/freshq/freshq/supervise/sdnotify"
	"github.com/freshq/freshq/supervise/ui"
	"github.com/freshq/freshq/wire"
)

// supervisor is one run: the files it owns (main.go's own) and the pieces run assembles.
type supervisor struct {
	log          zerolog.Logger
	seg          *shm.Segment
	bin          string
	workerConfig string // the configuration in force, as the workers read it (runtime directory, 0600)
	logFormat    string
	socket       string
	cfg          atomic.Pointer[config.Config]
	sockets      listeners.Inherited
	status       *wire.Client // worker 0's status, for /readyz and systemd; one client, kept-alive connections
	pool         *pool.Pool
	admin        *admin.Server
	ui           *ui.UI
	serveFile    *os.File // the crawler listener's socket (serve.listen), handed to worker 0; nil: off
	adminFile    *os.File // the admin listener's socket (listen), for a handover
}

// run starts everything and blocks until a signal or a restart storm ends it.
func (s *supervisor) run(load func() (*config.Config, []byte, error), sigs <-chan os.Signal) int {
	cfg := s.cfg.Load()
	s.status = wire.NewClient(s.socket)
	ln, err := s.listen(cfg)
	if err != nil {
		return 1
	}
	if err := s.assemble(cfg); err != nil {
		s.log.Error().Err(err).Msg("assembling the supervisor")
		ln.Close()
		return 1
	}
	srv, ln := s.admin.HTTPServer(ln) // timeouts and http.max_conns (package admin)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Msg("public listener stopped")
		}
	}()
	s.log.Info().Str("listen", ln.Addr().String()).Int("workers", cfg.Workers).Str("data_dir", cfg.DataDir).
		Str("shm", cfg.SHM.Path).Str("socket", s.socket).Str("inherited_from", s.sockets.From).Msg("freshq supervisor started")

	// The workers, then what watches them (systemd's notifications, the console's series):
	// these return once the pool's stop began (BeginStop, below).
	s.pool.Start()
	go sdnotify.Run(sdnotify.Options{Segment: s.seg, Workers: cfg.Workers, Status: s.worker0Status, Stopping: s.pool.Stopping,
		ReadyTimeout:  s.cfg.Load().Supervisor.ReadyTimeout.D(),
		WatchdogStall: func() time.Duration { return s.cfg.Load().Supervisor.WatchdogStall.D() }, Log: s.log})
	go s.ui.Run()

	code := s.serve(load, sigs)
	start := time.Now()
	s.pool.BeginStop()
	s.admin.EndWaits()
	sdnotify.Notify("STOPPING=1")
	killed := s.pool.Stop(s.cfg.Load().Supervisor.ShutdownTimeout.D(), func() { s.admin.Stop(srv) })
	s.log.Info().Int("exit", code).Int("killed", killed).Dur("took", time.Since(start)).Msg("freshq supervisor stopped")
	return code
}

// listen takes the admin listener and the crawler listener's socket: each is inherited
// (systemd's, or a handover's) or bound here (package supervise/listeners).
func (s *supervisor) listen(cfg *config.Config) (net.Listener, error) {
	ln, adminFile, err := s.sockets.ListenAdmin(cfg.Listen)
	if err != nil {
		s.log.Error().Err(err).Str("listen", cfg.Listen).Msg("listen")
		return nil, err
	}
	s.adminFile = adminFile
	// The crawler listener is bound here, once, and served by worker 0 (package serve): the
	// socket outlives a restart of worker 0, whose connections wait in the accept queue.
	if cfg.Serve.Listen != "" {
		var addr net.Addr
		s.serveFile, addr, err = s.sockets.ListenCrawler(cfg.Serve.Listen)
		if err != nil {
			s.log.Error().Err(err).Str("serve.listen", cfg.Serve.Listen).Msg("listen")
			return nil, err
		}
		s.log.Info().Str("serve", addr.String()).Str("inherited_from", s.sockets.From).Msg("crawler listener bound; worker 0 serves it")
	}
	return ln, nil
}

// assemble builds the supervisor's pieces, each given what it needs: the worker pool, the
// console, the collector of shared memory's series, and the admin listener's surface.
func (s *supervisor) assemble(cfg *config.Config) error {
	var err error
	if s.pool, err = pool.New(pool.Options{Bin: s.bin, WorkerConfig: s.workerConfig, Socket: s.socket, LogFormat: s.logFormat,
		ServeFile: s.serveFile, Segment: s.seg, Settings: func() pool.Settings { return poolSettings(s.cfg.Load()) }, Log: s.log,
		Workers: cfg.Workers}); err != nil {
		return err
	}
	if s.ui, err = ui.New(ui.Options{Token: func() string { return s.cfg.Load().Token }, Socket: s.socket, Segment: s.seg,
		Stopping: s.pool.Stopping, Log: s.log}); err != nil {
		return err
	}
	metrics, err := shmmetrics.New(shmmetrics.Options{
		Segment:   s.seg,
		Workers:   cfg.Workers,
		Clustered: func() bool { return s.cfg.Load().Store.Backend == config.StoreBackendPostgres },
		HostLimits: func() hosts.Limits {
			c := s.cfg.Load()
			return assemble.HostsLimits(c.Render.Hosts, c.Render.Domains...)
		},
		Worker0: s.status,
	})
	if err != nil {
		return err
	}
	s.admin, err = admin.New(admin.Options{Settings: func() admin.Settings { return adminSettings(s.cfg.Load()) }, Socket: s.socket, Status: s.worker0Status, Stopping: s.pool.Stopping,
		Metrics: metrics, Console: s.ui.Console(), Series: s.ui.SeriesHandler})
	return err
}

// serve answers signals until one ends the run (SIGTERM, SIGINT, or a handover that took) or a
// restart storm does; it returns the exit code.
func (s *supervisor) serve(load func() (*config.Config, []byte, error), sigs <-chan os.Signal) int {
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				s.reload(load)
				continue
			}
			if sig == syscall.SIGUSR2 {
				pid, err := listeners.HandOver(s.adminFile, s.serveFile)
				if err != nil {
					s.log.Error().Err(err).Msg("handover refused; this supervisor keeps serving")
					continue
				}
				s.log.Info().Int("new_pid", pid).Msg("handed the listeners over; draining")
				return 0
			}
			s.log.Info().Str("signal", sig.String()).Msg("draining")
			return 0
		case err := <-s.pool.Fatal():
			s.log.Error().Err(err).Msg("restart intensity exceeded; stopping so that systemd's policy takes over")
			return ExitIntensity
		}
	}
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
	s.pool.Signal(syscall.SIGHUP)
	s.log.Info().Bool("ready_enabled", cfg.ReadyEnabled()).Str("log_level", cfg.Log.Level).Msg("configuration reloaded")
	s.log.Debug().Str("log_level", cfg.Log.Level).Msg("debug lines logged")
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

// handoverWait bounds how long a supervisor that took over waits for the old one's locks: the
// old one's whole stop (the render workers', the listener's and worker 0's bounds) and a margin.
func handoverWait(cfg *config.Config) time.Duration {
	return 2*(cfg.Supervisor.ShutdownTimeout.D()+pool.FlushMargin) + admin.DrainGrace + admin.DrainBound + 10*time.Second
}
