package pool

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// child is one worker slot: the current process in it and its restart history.
type child struct {
	index    int
	p        *Pool
	restarts *intensity

	mu      sync.Mutex
	starts  int
	proc    *os.Process
	done    chan struct{} // closed when the current process has exited
	backoff time.Duration
}

// start launches the worker process and a goroutine that restarts it when it dies. Once the
// pool is stopping it launches nothing (mayStart): the check and the launch hold c.mu, which
// signal takes too, so a stop either finds the new process or prevents it.
func (c *child) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mayStart() {
		return
	}
	c.done = make(chan struct{})
	cfg := c.p.o.Settings()
	// The worker reads the configuration in force (the supervisor's validated copy), never the
	// operator's file: a bad edit or a refused reload cannot reach a restarted worker.
	args := []string{"-index", strconv.Itoa(c.index), "-config", c.p.o.WorkerConfig, "-data-dir", cfg.DataDir,
		"-shm", cfg.SegmentPath, "-socket", c.p.o.Socket, "-log-format", c.p.o.LogFormat}
	if c.index == 0 && c.p.o.ServeFile != nil {
		args = append(args, "-serve-fd", "3") // ExtraFiles[0] is the child's descriptor 3
	}
	cmd := exec.Command(c.p.o.Bin, args...)
	if c.index == 0 && c.p.o.ServeFile != nil {
		cmd.ExtraFiles = []*os.File{c.p.o.ServeFile}
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// Workers die with the supervisor. Pdeathsig fires when the thread that forked exits, so the
	// fork happens on a locked thread that this goroutine never releases while the child lives.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	started := make(chan error, 1)
	done := c.done
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine, after the child
		if err := cmd.Start(); err != nil {
			started <- err
			close(done)
			return
		}
		started <- nil
		err := cmd.Wait()
		close(done)
		c.exitedWith(err)
	}()
	if err := <-started; err != nil {
		c.p.o.Log.Error().Err(err).Int("worker", c.index).Msg("starting worker")
		go c.exitedWith(err)
		return
	}
	c.proc = cmd.Process
	if w, err := c.p.o.Segment.Worker(c.index); err == nil && c.starts > 0 {
		w.NoteRestart()
	}
	c.starts++
	c.p.o.Log.Info().Int("worker", c.index).Int("child_pid", c.proc.Pid).Msg("worker started")
}

// mayStart reports whether this worker may (re)start. A render worker may not once the pool
// stops. Worker 0 may until it is told to stop itself (closing): while the render workers
// drain, their last results go to worker 0, and a worker 0 that crashed then and stayed down
// would have every one of them dropped.
func (c *child) mayStart() bool {
	if c.index == 0 {
		return !c.p.closing.Load()
	}
	return !c.p.stopping.Load()
}

// exitedWith decides what a worker's exit means: nothing once it may not start again,
// otherwise a restart after a backoff (the shortest while the pool stops: the render workers'
// flush bound is running), unless restarts exceed the intensity limit.
func (c *child) exitedWith(err error) {
	if !c.mayStart() {
		return
	}
	cfg := c.p.o.Settings()
	c.p.o.Log.Error().Err(err).Int("worker", c.index).Msg("worker exited")
	if !c.restarts.allow(time.Now()) {
		select {
		case c.p.fatal <- fmt.Errorf("more than %d restarts within %s", cfg.RestartIntensity, cfg.RestartPeriod):
		default:
		}
		return
	}
	c.mu.Lock()
	c.backoff = min(max(2*c.backoff, cfg.BackoffMin), cfg.BackoffMax)
	wait := c.backoff
	if c.p.stopping.Load() {
		wait = cfg.BackoffMin
	}
	c.mu.Unlock()
	time.Sleep(wait)
	c.start()
	// A worker that stays up for a whole restart period has recovered: its backoff starts over.
	go func(done <-chan struct{}) {
		select {
		case <-done:
		case <-time.After(cfg.RestartPeriod):
			c.mu.Lock()
			c.backoff = 0
			c.mu.Unlock()
		}
	}(c.exited())
}

func (c *child) signal(sig syscall.Signal) {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p != nil {
		p.Signal(sig)
	}
}

func (c *child) exited() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// intensity is OTP's restart intensity: at most max restarts within period, across all workers.
type intensity struct {
	mu     sync.Mutex
	max    int
	period time.Duration
	times  []time.Time
}

func newIntensity(max int, period time.Duration) *intensity {
	return &intensity{max: max, period: period}
}

// allow records a restart at now and reports whether it is within the limit.
func (in *intensity) allow(now time.Time) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	keep := in.times[:0]
	for _, t := range in.times {
		if now.Sub(t) < in.period {
			keep = append(keep, t)
		}
	}
	in.times = append(keep, now)
	return len(in.times) <= in.max
}
