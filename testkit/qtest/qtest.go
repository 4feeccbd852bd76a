// Package qtest builds the queue's moving parts for tests: a Badger store in a temporary
// directory whose floor is the cell of a real shared-memory segment, that segment, a policy
// that tests can swap (as a reload does), and a manual clock. Nothing here sleeps.
//
// Politeness: tests put most keys on one or two hosts, and most claim more rows than
// render.hosts.max_concurrency allows one host. Unless a test's YAML sets render.hosts
// (politeness tests do), the Env's policy allows config.HostsMaxConcurrencyMax renders per
// host, the most there is, so that a test of leases or claims tests those.
package qtest

import (
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
)

// Hour in ms.
const Hour = int64(3_600_000)

// Env is one node's queue state.
type Env struct {
	T       testing.TB
	Store   store.Store
	Seg     *shm.Segment
	Worker0 *shm.Worker
	clock   atomic.Int64
	pol     atomic.Pointer[policy.Policy]
	cfg     atomic.Pointer[config.Config]
}

// New builds an Env configured by yaml (on top of the defaults), with the clock at startMs.
func New(t testing.TB, yaml string, startMs int64, segOpts shm.Options) *Env {
	t.Helper()
	return NewClassified(t, yaml, startMs, segOpts, nil)
}

// NewClassified is New with a store that keeps the class index of classify's classifier for
// the configuration's policy, as worker 0's does (classify is sweep.NewClassifier, which this
// package cannot import). A nil classify is New.
func NewClassified(t testing.TB, yaml string, startMs int64, segOpts shm.Options, classify func(*policy.Policy) store.Classifier) *Env {
	t.Helper()
	cfg := parse(t, yaml)
	dir := t.TempDir()
	if segOpts.ReadyCapacity == 0 {
		segOpts.ReadyCapacity = cfg.Queue.Ready.Capacity
	}
	if segOpts.KeyCapacity == 0 {
		segOpts.KeyCapacity = cfg.Queue.Ready.KeyCapacity
	}
	if segOpts.LeaseCapacity == 0 {
		segOpts.LeaseCapacity = cfg.Queue.MaxLeases
	}
	segOpts.Workers = max(segOpts.Workers, 4)
	segOpts.EpochMs = startMs - 1
	seg, err := shm.Create(filepath.Join(dir, "seg"), segOpts)
	if err != nil {
		t.Fatal(err)
	}
	opts := &badgerstore.Options{Floor: seg.Floor()}
	if classify != nil {
		opts.Classifier = classify(compile(t, cfg))
	}
	st, err := badgerstore.Open(filepath.Join(dir, "db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	w0, _ := seg.Worker(0)
	e := &Env{T: t, Store: st, Seg: seg, Worker0: w0}
	e.clock.Store(startMs)
	e.cfg.Store(cfg)
	e.pol.Store(compile(t, cfg))
	t.Cleanup(func() {
		st.Close()
		seg.Close()
	})
	return e
}

// Now is the manual clock.
func (e *Env) Now() int64 { return e.clock.Load() }

// Advance moves the clock.
func (e *Env) Advance(ms int64) { e.clock.Add(ms) }

// Policy is the policy in force.
func (e *Env) Policy() *policy.Policy { return e.pol.Load() }

// Config is the configuration in force: a test narrows it to a service's settings as a node
// does (assemble/settings), through its package's test hook.
func (e *Env) Config() *config.Config { return e.cfg.Load() }

// Reload swaps in the configuration yaml, as SIGHUP does.
func (e *Env) Reload(yaml string) {
	e.T.Helper()
	cfg := parse(e.T, yaml)
	e.cfg.Store(cfg)
	e.pol.Store(compile(e.T, cfg))
}

// compile is the policy of cfg, as a node compiles it (assemble.Policy).
func compile(t testing.TB, cfg *config.Config) *policy.Policy {
	t.Helper()
	pol, err := assemble.Policy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// parse reads a test's configuration; see the package doc for render.hosts.
func parse(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(yaml, "hosts:") {
		cfg.Render.Hosts.MaxConcurrency = config.HostsMaxConcurrencyMax
	}
	return cfg
}

// Put files a schedule row through the funnel.
func (e *Env) Put(key string, dueAtMs int64, submitted bool, intervalMs int64, lanes store.Lanes) {
	e.T.Helper()
	sch, err := store.NewSchedule([]byte(key), dueAtMs, submitted, intervalMs, lanes)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := e.Store.WriteSchedule(sch); err != nil {
		e.T.Fatal(err)
	}
}

// Grant leases key as a render worker's claim would (ten minutes, holder 1), for a result that
// is to be applied; it fails the test if the table refuses.
func (e *Env) Grant(key []byte) shm.Lease {
	e.T.Helper()
	l, st := e.Seg.Leases().Acquire(shm.KeyHash(key), e.Now(), 600_000, 1)
	if st != shm.Acquired {
		e.T.Fatalf("lease %q: %v", key, st)
	}
	return l
}

// AllRows returns every row of the due index, due or not.
func (e *Env) AllRows() []store.DueRow {
	e.T.Helper()
	res, err := e.Store.ScanDue(0, math.MaxInt64, 1<<30)
	if err != nil {
		e.T.Fatal(err)
	}
	return res.Rows
}

// CheckF1 fails the test if any row of the index lies below the floor. Call it between
// operations, when no pass is in progress: then F1 says every row is at or above the floor.
func (e *Env) CheckF1(step string) {
	e.T.Helper()
	floor := e.Seg.Floor().Load()
	for _, r := range e.AllRows() {
		if r.DueAtMs < floor {
			e.T.Fatalf("%s: F1 violated: row %q due %d is below the floor %d", step, r.Key, r.DueAtMs, floor)
		}
	}
}

// Log returns a logger writing JSON lines to w (pass nil for none).
func Log(w interface{ Write([]byte) (int, error) }) zerolog.Logger {
	if w == nil {
		return zerolog.Nop()
	}
	return zerolog.New(w)
}

// InWindow places op inside the window a test signal opens (intake.TestSignals.AfterDecide,
// say: between a batch's reads and its commit). It sets *signal to start op in a goroutine
// when the window opens and to hold the window open until op either finished (it raced into
// the window) or reports on waiting that it waits for a lock (it is serialised behind the
// window's owner). The returned channel is closed once op has returned. No timing is involved.
func InWindow(signal *func(), waiting <-chan struct{}, op func()) (done chan struct{}) {
	done = make(chan struct{})
	*signal = func() {
		go func() { op(); close(done) }()
		select {
		case <-done:
		case <-waiting:
		}
	}
	return done
}

// Source is what holds a configuration in force and its policy: an *Env, or a test's node
// that embeds one.
type Source interface {
	Config() *config.Config
	Policy() *policy.Policy
}

// Settings returns the settings in force of a service, narrowed by of (a node's narrowing,
// assemble/settings, which each package's tests receive through a hook) from src's configuration
// and policy: read again after a Reload, and the same pointer until then, as a worker's are.
func Settings[T any](src Source, of func(*config.Config, *policy.Policy) T) func() *T {
	var (
		mu   sync.Mutex
		last *config.Config
		cur  *T
	)
	return func() *T {
		cfg, pol := src.Config(), src.Policy()
		mu.Lock()
		defer mu.Unlock()
		if cur == nil || cfg != last {
			v := of(cfg, pol)
			cur, last = &v, cfg
		}
		return cur
	}
}

// Must(New(...))(tb) is the service a constructor returned, or tb fails with the constructor's
// error: a test builds a service the way production does, and a dependency it left out is the
// test's own mistake. (The constructor's two results can only be passed on whole, hence the
// second call for tb.)
func Must[T any](v T, err error) func(testing.TB) T {
	return func(tb testing.TB) T {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return v
	}
}
