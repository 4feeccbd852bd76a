// Command freshq-worker is one worker process of freshq. The supervisor starts it; it is not
// meant to be run by hand. Worker 0 (-index 0) is the store worker: it owns Badger, runs the
// sweep, serves the control socket and applies every write. Workers 1..N-1 render: they claim
// from the shared-memory ready set, render, and send results to worker 0 in batches.
//
// This package only parses flags, loads the configuration, assembles and runs: a worker is an
// ordered list of services (package node: worker 0's store, sweep loop (sweeploop), control
// socket and crawler listener; a render worker's render pool (renderloop)), started in order
// and stopped in the reverse order (internal/startstop). What the binary still gives node is
// worker 0's store engine and its part in a cluster (openstore.go, cluster.go,
// capacity_cluster.go), passed in as functions.
//
// Signals: SIGTERM drains and exits 0; SIGHUP rereads the configuration (the supervisor's copy
// of the configuration in force; a bad one is logged and the old one kept). SIGINT is ignored:
// the supervisor orders the stop, render workers before worker 0, so a Ctrl-C that reaches a
// worker directly must not race that order. The handlers are installed first thing in main, so
// a signal that arrives while the process starts is never fatal.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/assemble/engine"
	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/internal/grantlog"
	"github.com/freshq/freshq/internal/logging"
	"github.com/freshq/freshq/internal/testhold"
	"github.com/freshq/freshq/node"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// env is what both roles share.
type env struct {
	index      int
	configPath string
	dataDir    string // override of data_dir; "" = the file's
	shmPath    string // override of shm.path; "" = the file's
	socketPath string
	serveFD    int // the crawler listener's socket, inherited from the supervisor; 0: none
	log        zerolog.Logger
	cur        atomic.Pointer[node.InForce]
	seg        *shm.Segment
	worker     *shm.Worker
	// reloads is told of every reload put in force (one pending at most): worker 0 reschedules
	// the rows the new cadences move.
	reloads chan struct{}
}

func main() {
	signal.Ignore(syscall.SIGINT)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	testhold.Hold()
	os.Exit(run(os.Args[1:], term, hup))
}

func run(args []string, term, hup <-chan os.Signal) int {
	fs := flag.NewFlagSet("freshq-worker", flag.ContinueOnError)
	e := &env{reloads: make(chan struct{}, 1)}
	fs.IntVar(&e.index, "index", -1, "worker index (0 = the store worker)")
	fs.StringVar(&e.configPath, "config", "", "configuration file (the supervisor's copy of the one in force)")
	fs.StringVar(&e.dataDir, "data-dir", "", "override data_dir")
	fs.StringVar(&e.shmPath, "shm", "", "override shm.path")
	fs.StringVar(&e.socketPath, "socket", "", "worker 0's control socket (default: <data_dir>/worker0.sock)")
	fs.IntVar(&e.serveFD, "serve-fd", 0, "worker 0: the crawler listener's socket (serve.listen), inherited from the supervisor")
	logFormat := fs.String("log-format", "json", "json or console")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	e.log = newLogger(*logFormat, e.index)
	if e.index < 0 || e.configPath == "" {
		e.log.Error().Msg("-index and -config are required; freshq-worker is started by freshq-supervisor")
		return 2
	}
	cfg, err := e.loadConfig()
	if err != nil {
		e.log.Error().Err(err).Msg("configuration")
		return 2
	}
	logging.SetLevel(cfg.Log.Level)
	if err := e.setConfig(cfg); err != nil {
		e.log.Error().Err(err).Msg("configuration")
		return 2
	}
	if e.socketPath == "" {
		e.socketPath = filepath.Join(cfg.DataDir, "worker0.sock")
	}
	e.seg, err = shm.Attach(cfg.SHM.Path)
	if err != nil {
		e.log.Error().Err(err).Msg("attaching the shared-memory segment")
		return 1
	}
	defer e.seg.Close()
	if e.worker, err = e.seg.Worker(e.index); err != nil {
		e.log.Error().Err(err).Msg("worker block")
		return 1
	}
	e.worker.Start(os.Getpid(), nowMs())

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-term:
			e.log.Info().Msg("stopping")
			stop()
		case <-ctx.Done():
		}
	}()
	go e.reloadOnHUP(ctx, hup)
	go e.heartbeat(ctx)

	if err := runNode(ctx, e); err != nil && !errors.Is(err, context.Canceled) {
		e.log.Error().Err(err).Msg("worker failed")
		return 1
	}
	e.log.Info().Msg("worker stopped")
	return 0
}

func nowMs() int64 { return clock.NowMs() }

func newLogger(format string, index int) zerolog.Logger {
	return logging.New(format).With().Int("worker", index).Logger()
}

// loadConfig reads the file and applies the supervisor's overrides.
func (e *env) loadConfig() (*config.Config, error) {
	cfg, err := config.Load(e.configPath)
	if err != nil {
		return nil, err
	}
	if e.dataDir != "" {
		cfg.DataDir = e.dataDir
	}
	if e.shmPath != "" {
		cfg.SHM.Path = e.shmPath
	}
	return cfg, nil
}

// reloadOnHUP swaps in a new configuration on SIGHUP. The sweep and the claims read their
// settings (with the policy) once per sweep or claim, so the switch is atomic for each of them.
func (e *env) reloadOnHUP(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			cfg, err := e.loadConfig()
			if err != nil {
				e.log.Error().Err(err).Msg("reload refused; the previous configuration stays in force")
				continue
			}
			if err := e.setConfig(cfg); err != nil {
				e.log.Error().Err(err).Msg("reload refused; the previous configuration stays in force")
				continue
			}
			logging.SetLevel(cfg.Log.Level)
			select {
			case e.reloads <- struct{}{}:
			default: // one pending is enough: the run takes the configuration in force then
			}
			e.log.Info().Bool("ready_enabled", cfg.ReadyEnabled()).Str("log_level", cfg.Log.Level).Msg("configuration reloaded")
			e.log.Debug().Str("log_level", cfg.Log.Level).Msg("debug lines logged")
		}
	}
}

// heartbeat beats every second in shm; the supervisor's watchdog pings systemd only while every
// worker's beats advance.
func (e *env) heartbeat(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		e.worker.Beat(nowMs())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// holder identifies this process's leases.
func (e *env) holder() uint64 { return uint64(os.Getpid())<<16 | uint64(e.index) }

// setConfig narrows cfg (validated) and puts it in force.
func (e *env) setConfig(cfg *config.Config) error {
	f, err := node.NewInForce(cfg)
	if err != nil {
		return err
	}
	e.cur.Store(f)
	return nil
}

// runNode assembles this worker (package node) and runs it until ctx ends or, for worker 0,
// its control socket fails; then it stops it.
func runNode(ctx context.Context, e *env) error {
	n := newNode(e)
	defer n.Stop()
	if err := n.Start(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-n.Failed():
		e.log.Error().Err(err).Msg("control socket stopped")
	}
	return nil
}

// newNode is this worker's node: its settings, the store's engine (store.backend), and the
// cluster's parts on the capability that engine offers.
func newNode(e *env) *node.Node {
	return node.New(node.Settings{Index: e.index, Holder: e.holder(), Socket: e.socketPath, ServeFD: e.serveFD, InForce: &e.cur, Reloads: e.reloads},
		node.Deps{Seg: e.seg, Worker: e.worker, Log: e.log, Now: nowMs,
			OpenStore: func(ctx context.Context, cfg *config.Config) (store.Store, cluster.Engine, error) {
				return engine.Open(ctx, cfg, engine.Deps{Floor: e.seg.Floor(), Worker: e.worker, TestSignals: pgTestSignals(), Log: e.log})
			},
			GrantLog: func(cfg *config.Config) (*grantlog.Log, func([]byte, int64)) {
				gl := openGrantLog(e, cfg)
				return gl, grantHook(gl)
			},
			Cluster: node.EngineCluster(e.seg, e.worker, e.log),
		})
}
