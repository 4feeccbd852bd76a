package pool

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/shm"
)

// Options are the pool's dependencies.
type Options struct {
	Bin          string // the worker binary
	WorkerConfig string // the configuration in force, as the workers read it (runtime directory, 0600)
	Socket       string // worker 0's control socket
	LogFormat    string
	// ServeFile is the crawler listener's socket (serve.listen), handed to worker 0 as its
	// descriptor 3; nil: off.
	ServeFile *os.File
	Segment   *shm.Segment
	// Settings are the settings in force: read at every (re)start, so a worker restarted
	// after a reload gets the reloaded settings.
	Settings func() Settings
	Log      zerolog.Logger
	Workers  int
}

// Settings are the pool's settings (data_dir, shm.path and supervisor.* in the configuration).
type Settings struct {
	DataDir, SegmentPath string // the workers' -data-dir and -shm
	// RestartIntensity restarts at most within RestartPeriod, across all workers; more are
	// fatal. A worker up for a whole RestartPeriod has recovered: its backoff starts over.
	RestartIntensity int
	RestartPeriod    time.Duration
	// A worker's restarts wait BackoffMin, doubled at each restart up to BackoffMax.
	BackoffMin, BackoffMax time.Duration
}

// ErrMissing is returned by New when a dependency is missing.
var ErrMissing = errors.New("pool: missing dependency")

// Pool is the supervisor's worker processes: worker 0 and the render workers.
type Pool struct {
	o        Options
	children []*child
	stopping atomic.Bool // the stop began: render workers stop and are not restarted
	closing  atomic.Bool // worker 0 was told to stop: it is not restarted either
	fatal    chan error  // a restart storm
}

// New is a pool of o.Workers workers, none started yet.
func New(o Options) (*Pool, error) {
	switch {
	case o.Bin == "" || o.WorkerConfig == "" || o.Socket == "":
		return nil, fmt.Errorf("%w: Bin, WorkerConfig and Socket", ErrMissing)
	case o.Segment == nil || o.Settings == nil:
		return nil, fmt.Errorf("%w: Segment and Settings", ErrMissing)
	case o.Workers < 1:
		return nil, fmt.Errorf("%w: Workers", ErrMissing)
	}
	return &Pool{o: o, fatal: make(chan error, 1)}, nil
}

// Start launches every worker, under one restart intensity (supervisor.restart_intensity
// within supervisor.restart_period, across all workers).
func (p *Pool) Start() {
	cfg := p.o.Settings()
	restarts := newIntensity(cfg.RestartIntensity, cfg.RestartPeriod)
	for i := range p.o.Workers {
		c := &child{index: i, p: p, restarts: restarts}
		p.children = append(p.children, c)
		c.start()
	}
}

// Fatal receives an error when workers restart more often than the intensity allows.
func (p *Pool) Fatal() <-chan error { return p.fatal }

// Stopping reports whether the stop began (BeginStop).
func (p *Pool) Stopping() bool { return p.stopping.Load() }

// BeginStop marks the stop begun: from now on no render worker is restarted, and a worker's
// exit is restarted after the shortest backoff.
func (p *Pool) BeginStop() { p.stopping.Store(true) }

// Signal sends sig to every worker. A nil pool has no workers.
func (p *Pool) Signal(sig syscall.Signal) {
	if p == nil {
		return
	}
	for _, c := range p.children {
		c.signal(sig)
	}
}

// FlushMargin is how long past the drain bound a render worker has to deliver its last results
// (it gives up on worker 0 5 s past it, at the worker's renderFlushTimeout), and worker 0 to
// finish its cut requests and sitemap runs (3 s, its finishTimeout) and close Badger.
const FlushMargin = 10 * time.Second

// Stop stops the pool in order, so that no result is lost: the render workers first
// (SIGTERM: they stop claiming, finish or cancel their renders within drain, and deliver every
// result to worker 0, which is still serving, and restarted should it crash meanwhile), then
// the public listener (stopListener), then worker 0 (final commit, Badger closed). A worker
// still running past its bound is killed; it returns how many were.
func (p *Pool) Stop(drain time.Duration, stopListener func()) int {
	killed := 0
	wait := func(cs []*child, bound time.Duration) {
		deadline := time.Now().Add(bound)
		for _, c := range cs {
			t := time.NewTimer(time.Until(deadline))
			select {
			case <-c.exited():
				t.Stop()
			case <-t.C:
				p.o.Log.Warn().Int("worker", c.index).Dur("bound", bound).Msg("worker did not stop within its bound; killing it")
				c.signal(syscall.SIGKILL)
				<-c.exited()
				killed++
			}
		}
	}
	if len(p.children) > 1 {
		for _, c := range p.children[1:] {
			c.signal(syscall.SIGTERM)
		}
		wait(p.children[1:], drain+FlushMargin)
	}
	stopListener()
	p.closing.Store(true) // before the signal: a worker 0 restarting now is not launched
	if len(p.children) > 0 {
		p.children[0].signal(syscall.SIGTERM)
		wait(p.children[:1], drain+FlushMargin)
	}
	return killed
}
