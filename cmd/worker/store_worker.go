package main

import (
	"context"
	"errors"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/assemble/node"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/crawlers"
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/renderlog"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/sitemapruns"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/wire"
)

// runStoreWorker is worker 0: the store, the sweep, the control socket, until ctx ends or the
// control socket fails.
func runStoreWorker(ctx context.Context, e *env) error {
	w := newWorker0(e)
	defer w.Stop()
	if err := w.Start(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-w.served:
		e.log.Error().Err(err).Msg("control socket stopped")
	}
	return nil
}

// errWorker0Stopped is Start after Stop: worker 0 is started once.
var errWorker0Stopped = errors.New("worker 0 has been stopped")

// worker0 is the store worker assembled from its services, started in this order and stopped
// in the reverse one (Stop), except the cluster membership, which hands its shards over right
// after the sweep loop stops:
//
//	store (open) → cluster membership → reconcile → GC → control socket (handlers, sitemap runs) → capacity recounts → sweep loop
//
// It keeps the startstop contract: Stop without Start is a no-op, Stop twice is safe, Start
// while started is a no-op (and after Stop, errWorker0Stopped). Start and Stop are serialised.
type worker0 struct {
	e *env

	mu      sync.Mutex
	started bool
	stopped bool

	st       store.Store   // nil until opened
	member   memberService // the cluster's membership; a no-op on Badger
	farm     farmService   // the hosts' limits and pauses across the cluster; a no-op on Badger
	gc       gcService
	sweep    *sweepService // nil until built
	srv      *http.Server  // nil until the socket listens
	inflight *handlers
	sitemaps sitemapRuns
	served   chan error // the control socket's Serve returned (it failed)
	status   *sweepCounts
	capacity *capacity.Service  // nil until built
	misses   *misses.Flights    // render on miss; stopped before the socket drains
	watch    *missWatch         // wakes the misses' waiters on another node's commit; nil until built
	crawlers *crawlerListener   // serve.listen; nil when off
	resched  *rescheduleService // moves rows a reload's or a restart's cadences shortened; nil until built
}

// sweepCounts are the sweeps counted for the control socket's status.
type sweepCounts struct{ ok, failed atomic.Uint64 }

func newWorker0(e *env) *worker0 {
	return &worker0{e: e, served: make(chan error, 1), status: &sweepCounts{}}
}

// Start opens and reconciles the store, starts its GC, serves the control socket and starts
// the sweep loop, which ends with ctx (or Stop). If a step fails, Start returns its error with
// what it started still running: Stop stops it, whatever the step.
func (w *worker0) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return errWorker0Stopped
	}
	if w.started {
		return nil
	}
	w.started = true
	e := w.e
	cfg := e.cur.Load().Config()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return wrap("data dir", err)
	}
	st, err := openStore(ctx, cfg, e.seg.Floor(), pgFenced(e.worker), e.log)
	if err != nil {
		return wrap("open store", err)
	}
	w.st = st
	grants := openGrantLog(e, cfg)
	// Worker 0 is the host table's one writer: every result, local or remote, passes its
	// Applier's Tracker; in a cluster, the farm adopts the other nodes' pauses through it too.
	politeness := &hosts.Tracker{Seg: e.seg, Limits: e.hostLimits, Log: e.log}
	farm := newFarm(e, cfg, st, politeness)
	// The capacity accounting exists before the membership, whose heartbeats publish its
	// figures; in a cluster its demand counts the shards the node holds.
	w.capacity = capacity.NewService(st, e.policy, nowMs, backlogOf(e.worker), e.log)
	clusterCapacity(st, w.capacity)
	// Under queue.policy freshness the recount also tunes the threshold and the ceilings to the
	// measured capacity; the Applier, the demand flush and the explanation read the tuning.
	tuning := &freshness.TuningCell{}
	w.capacity.Freshness = &capacity.FreshTuner{Cell: tuning,
		Settings: func() capacity.FreshSettings {
			set := e.intakeSettings()
			return capacity.FreshSettings{On: set.Freshness.On, SweepMs: set.SweepInterval.Milliseconds(), StretchFactor: set.Freshness.StretchFactor}
		},
		Page: func(key []byte, row store.Row, t *store.Target, now int64) (capacity.FreshPage, bool) {
			return freshPage(e.intakeSettings(), tuning.Load(), key, row, t, now)
		}}
	// In a cluster the node takes its shards before anything reads or grants them, and learns
	// its share of each host's limit at the same tick.
	w.member = memberService{newMember(e, cfg, st, grants, farm, w.capacity)}
	if err := w.member.Start(ctx); err != nil {
		return wrap("cluster", err)
	}
	w.farm = farmService{farm}
	if err := w.farm.Start(ctx); err != nil {
		return wrap("hosts' farm", err)
	}
	if restored, err := st.Reconcile(nowMs()); err != nil {
		e.log.Error().Err(err).Msg("reconcile failed")
	} else if restored > 0 {
		e.log.Warn().Int("restored", restored).Msg("reconcile re-filed targets whose schedule row was missing")
	}
	w.gc = gcService{st: st}
	_ = w.gc.Start(ctx)

	// Every write of worker 0 also goes through the capacity ledger (demand) and meter
	// (renders completed): cst is the store with its writes reported; st stays the backend
	// for what must know which one it is.
	cst := capacity.WrapStore(st, w.capacity.Ledger, w.capacity.Meter)
	// Every write of worker 0 goes through changes, so that a sweep never publishes a row
	// written after its snapshot (see sweep.Changes).
	changes := sweep.NewChanges()
	writer := changes.Wrap(cst)
	locks := &intake.KeyLocks{} // every read-decide-write of worker 0 holds its keys' locks
	sweeps := w.status
	belowFloor := &belowFloorAlarm{st: st}
	// The embedded store takes the rows the sweep publishes as hints, so that their results
	// need not read them again; it may, as worker 0 is its only writer. PostgreSQL's rows can
	// be written by other nodes, so it takes none.
	hints, _ := st.(sweep.RowHints)
	sweeper, err := sweep.New(sweep.Options{
		Store: sweep.FromStore(cst, changes), Segment: e.seg, Changes: changes, Hints: hints, Worker: e.worker, Policy: e.policy, Settings: e.sweepSettings, Now: nowMs, Log: e.log,
		AfterSweep: func(res sweep.Result, err error) {
			if err != nil {
				sweeps.failed.Add(1)
				return
			}
			sweeps.ok.Add(1)
			if n, counted := belowFloor.afterSweep(nowMs()); counted {
				e.worker.Set(shm.CounterBelowFloor, uint64(n))
			}
		},
	})
	if err != nil {
		return wrap("sweeper", err)
	}
	// A fallback claim that finds the ready set exhausted asks for an early sweep.
	kick := make(chan struct{}, 1)
	index := kickingFallback{Fallback: &claim.IndexSource{Scanner: st, Segment: e.seg, Policy: e.policy, Settings: e.claimSettings, Now: nowMs, Granted: grantHook(grants), Worker: e.worker},
		ready: e.seg.Ready(), kick: kick}
	// One byte budget for every heavy request of worker 0 (results, bulk targets, sitemap bodies).
	heavy := api.NewLimiter(api.DefaultHeavyBytes, 0)
	// One targets service for every entry point that writes targets: the admin API, sitemap
	// runs, render on miss and the crawler listener.
	targetsSvc, err := intake.NewTargets(intake.TargetsDeps{Store: cst, Writer: writer, Deleter: writer, Locks: locks, Seg: e.seg, Settings: e.intakeSettings, Now: nowMs, Tuning: tuning})
	if err != nil {
		return wrap("targets", err)
	}
	// Render on miss: POST /v1/pages?wait= and the crawler listener wait on a flight the Applier wakes.
	w.misses = &misses.Flights{Targets: targetsSvc, Settings: e.missesSettings,
		Report: func(flights, waiters int) {
			e.worker.Set(shm.CounterMissFlights, uint64(flights))
			e.worker.Set(shm.CounterMissWaiters, uint64(waiters))
		}}
	// Worker 0's own series (the crawler listener's and the conditional checks'), which the
	// supervisor's /metrics merges from wire.PathServeMetrics.
	serveReg := prometheus.NewRegistry()
	conditional := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "freshq_render_conditional_total",
		Help: "Answers 304 to a conditional check, by whether worker 0 applied it as unchanged (not_modified) or refused it (refused: a page past its bounds, applied as a failure)."},
		[]string{"result"})
	serveReg.MustRegister(conditional)
	w.resched = &rescheduleService{e: e, targets: targetsSvc, reloads: e.reloads, reloaded: w.capacity.Reloaded}
	w.resched.register(serveReg)
	stale := &apply.StaleMeter{Now: nowMs}
	serveReg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "freshq_serve_observed_requests_total",
			Help: "Crawler requests served between two observations of their page's content, counted at the second."},
			func() float64 { served, _ := stale.Totals(); return served }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "freshq_serve_stale_requests_total",
			Help: "Of freshq_serve_observed_requests_total, those served after the content had changed (expected)."},
			func() float64 { _, st := stale.Totals(); return st }))
	// In a cluster another node may render a miss waited for here: its commit wakes the waiter.
	w.watch = newMissWatch(st, w.misses)
	if err := w.watch.Start(ctx); err != nil {
		return wrap("miss watch", err)
	}
	// Render verdicts: the suspect renders not applied are kept in worker 0's memory for
	// inspection (apply.Suspects says why memory), and counted with worker 0's own series.
	renders := renderlog.New(func() time.Time { return time.UnixMilli(nowMs()) })
	suspects := apply.NewSuspects()
	verdicts := newVerdictMetrics(serveReg)
	applier, err := apply.NewApplier(apply.ApplierDeps{Store: cst, Writer: writer, Locks: locks, Seg: e.seg,
		Settings: e.intakeSettings, Now: nowMs, Log: e.log, Misses: w.misses, Hosts: politeness, Stale: stale, Tuning: tuning,
		Suspects: suspects, Verdicts: verdicts, Renders: renders,
		Conditional: func(applied bool) {
			if applied {
				conditional.WithLabelValues("not_modified").Inc()
			} else {
				conditional.WithLabelValues("refused").Inc()
			}
		}})
	if err != nil {
		return wrap("applier", err)
	}
	control := &api.Control{
		Index:   index,
		Applier: applier,
		Targets: targetsSvc,
		Limit:   heavy,
		Status: func() wire.Status {
			return wire.Status{Serving: true, Sweeps: sweeps.ok.Load(), SweepFails: sweeps.failed.Load()}
		},
		Log: e.log,
	}
	mux := http.NewServeMux()
	w.inflight = &handlers{}
	control.Register(mux)
	(&api.Targets{Targets: targetsSvc, Limit: heavy}).Register(mux)
	runs := &sitemapruns.Runs{Targets: targetsSvc, Settings: e.sitemapSettings}
	w.sitemaps = runs
	if err := runs.Start(ctx); err != nil {
		return wrap("sitemap runs", err)
	}
	(&api.Sitemaps{Runs: runs, Limit: heavy}).Register(mux)
	(&api.Operate{Targets: targetsSvc, Misses: w.misses}).Register(mux)
	// Remote renderers claim like a render worker would, counted in worker 0's block.
	// Each remote claims under its own holder id (intake.RemoteHolder), capped by queue.max_remote_leases.
	remoteClaimer, err := claim.New(claim.Options{Segment: e.seg, Worker: e.worker,
		Fallback: index, Settings: e.claimSettings, Now: nowMs, Holder: uint64(os.Getpid())<<16 | 0xffff, Granted: grantHook(grants)})
	if err != nil {
		return wrap("remote claimer", err)
	}
	(&api.Remote{Applier: control.Applier, Limit: heavy, Claimer: remoteClaimer}).Register(mux)
	(&api.Renders{Log: renders}).Register(mux)
	view := clusterView(st, cfg, func() float64 { return e.policy().Boost() })
	var tally *crawlers.Tally // what each crawler family got, when worker 0 serves crawlers
	if e.serveFD > 0 {
		tally = &crawlers.Tally{}
	}
	(&api.Queue{Seg: e.seg, Now: nowMs, Cluster: view, Capacity: w.capacity.View, Settings: e.intakeSettings, Stale: stale, Crawlers: tally}).Register(mux)
	(&api.Capacity{View: w.capacity.View}).Register(mux)
	(&api.Plan{Compute: node.PlanFunc(w.capacity)}).Register(mux)
	(&api.Cluster{View: view}).Register(mux)
	(&api.Keys{Targets: targetsSvc}).Register(mux)
	(&api.Explain{Targets: targetsSvc}).Register(mux)
	(&api.Suspects{Applier: applier}).Register(mux)

	// The crawler listener: worker 0 serves pages itself, one store read from the request, on
	// the socket the supervisor listens on (so it outlives a restart of worker 0).
	mux.Handle("GET "+wire.PathServeMetrics, promhttp.HandlerFor(serveReg, promhttp.HandlerOpts{}))
	if e.serveFD > 0 {
		demand, err := intake.NewDemand(intake.DemandDeps{Store: cst, Writer: writer, Locks: locks, Settings: e.intakeSettings, Now: nowMs, Tuning: tuning})
		if err != nil {
			return wrap("demand", err)
		}
		w.crawlers = &crawlerListener{e: e, reg: serveReg, targets: targetsSvc, misses: w.misses, demand: demand, tally: tally}
		if err := w.crawlers.Start(ctx); err != nil {
			return wrap("crawler listener", err)
		}
	}

	ln, err := listenUnix(e.socketPath)
	if err != nil {
		return wrap("control socket", err)
	}
	w.srv = &http.Server{Handler: w.inflight.wrap(mux), ReadHeaderTimeout: 10 * time.Second}
	go func() { w.served <- w.srv.Serve(ln) }()
	e.log.Info().Str("socket", e.socketPath).Str("data_dir", cfg.DataDir).Msg("store worker serving")

	if err := w.capacity.Start(ctx); err != nil {
		return wrap("capacity", err)
	}
	if err := w.resched.Start(ctx); err != nil {
		return wrap("reschedule", err)
	}
	w.sweep = &sweepService{e: e, sweeper: sweeper, kick: kick}
	return w.sweep.Start(ctx)
}

// Stop stops worker 0 in order, so that nothing writes to a closed store. The sweep loop
// stops first, at once: a pool that stops needs no new ready set. Then the control socket, its
// sitemap runs and its handlers (workerStop, with its bounds), then the GC, and last the store,
// which is closed only if no writer is left (see workerStop.run).
func (w *worker0) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started || w.stopped {
		return
	}
	w.stopped = true
	if w.sweep != nil {
		w.sweep.Stop()
	}
	if w.resched != nil {
		w.resched.Stop() // it writes: stopped between two chunks, before the store closes
	}
	// A stopping node hands its shards over at once: the other nodes need not wait for a TTL,
	// and the results still in flight here are fenced from now on (at-least-once).
	w.farm.Stop()
	w.member.Stop()
	closeStore := true // false when a writer may still run: see workerStop
	if w.watch != nil {
		w.watch.Stop()
	}
	if w.misses != nil {
		w.misses.Stop() // its waiters are answered 503 now, not at the end of the drain
	}
	if w.crawlers != nil {
		w.crawlers.Stop() // before the store closes: it reads pages
	}
	if w.srv != nil {
		stop := &workerStop{srv: w.srv, inflight: w.inflight, sitemaps: w.sitemaps, log: w.e.log, after: time.After,
			drain: w.e.cur.Load().Config().Supervisor.ShutdownTimeout.D()}
		closeStore = stop.run()
		os.Remove(w.e.socketPath)
	}
	if w.capacity != nil {
		w.capacity.Stop() // its recount reads the store
	}
	if w.st == nil {
		return
	}
	w.gc.Stop()
	if !closeStore {
		return
	}
	if err := w.st.Close(); err != nil {
		w.e.log.Error().Err(err).Msg("closing the store")
	}
}

// finishTimeout bounds, after the control socket's drain, how long worker 0 waits for the
// sitemap runs to stop and for the requests it cut to return.
const finishTimeout = 3 * time.Second

// workerStop stops worker 0's writers: the control socket's requests and the sitemap runs.
type workerStop struct {
	srv      *http.Server
	inflight *handlers
	sitemaps sitemapRuns
	log      zerolog.Logger
	after    func(time.Duration) <-chan time.Time // time.After; a test fires its own
	drain    time.Duration                        // supervisor.shutdown_timeout
}

// run stops the writers and reports whether none is left, so that the store may be closed.
//
// The socket stops accepting and finishes the requests it has (the render workers, stopped
// first, have delivered their results already) within the drain bound. A request still running
// then (a bulk upload may take http.bulk_timeout) has its connection closed, and the requests
// and the sitemap runs get finishTimeout more to return, on a bound of their own. If a writer
// is still running past it, run reports false: the store is then left open, not closed under
// it. A process that exits without closing Badger loses nothing acknowledged (the store
// recovers from its write-ahead log at the next open, as after a kill), while a close under a
// live writer fails that write after it may have been half-applied.
func (w *workerStop) run() bool {
	drained := make(chan struct{})
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.after(w.drain):
			cancel()
		case <-drained:
		}
	}()
	err := w.srv.Shutdown(sctx)
	close(drained)
	if err != nil {
		w.log.Warn().Err(err).Int("requests", w.inflight.count()).Dur("shutdown_timeout", w.drain).
			Msg("control socket did not drain in time; closing its connections")
		w.srv.Close()
	}
	fctx, fcancel := context.WithCancel(context.Background())
	defer fcancel()
	bound := w.after(finishTimeout)
	go func() {
		select {
		case <-bound:
			fcancel()
		case <-fctx.Done():
		}
	}()
	ok := true
	runsStopped := make(chan struct{})
	go func() { w.sitemaps.Stop(); close(runsStopped) }()
	select {
	case <-runsStopped:
	case <-fctx.Done():
		w.log.Error().Msg("sitemap runs did not stop in time")
		ok = false
	}
	select {
	case <-w.inflight.idle():
	case <-fctx.Done():
		w.log.Error().Int("requests", w.inflight.count()).Msg("requests still running")
		ok = false
	}
	if !ok {
		w.log.Error().Msg("writers still running past the stop's bound; the store is left open rather than closed under them (it recovers at the next start)")
	}
	return ok
}

// handlers counts the control socket's requests in progress.
type handlers struct {
	mu      sync.Mutex
	n       int
	waiting []chan struct{} // closed when n drops to 0
}

// wrap counts next's requests while they run.
func (h *handlers) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
		defer h.leave()
		next.ServeHTTP(w, r)
	})
}

func (h *handlers) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n--; h.n == 0 {
		for _, c := range h.waiting {
			close(c)
		}
		h.waiting = nil
	}
}

// idle returns a channel closed once no request runs.
func (h *handlers) idle() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := make(chan struct{})
	if h.n == 0 {
		close(c)
	} else {
		h.waiting = append(h.waiting, c)
	}
	return c
}

func (h *handlers) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// sweepLoop sweeps at once, then every queue.ready.sweep_interval as it stands after each
// sweep (a reload changes the interval without a restart), and early when a claim finds the
// ready set exhausted, two sweep durations after the claim asked (kickWait). A sweep that left
// a paused host's rows out sweeps again when the pause ends, if that is sooner than the tick.
// Whatever the reason, the next sweep waits at least as long as the last one took (sweepWait),
// so sweeping takes at most half of worker 0 however hard the claims press and however large
// the due set a sweep reads.
func sweepLoop(ctx context.Context, e *env, s *sweep.Sweeper, kick <-chan struct{}) {
	for {
		start := time.Now()
		res, _ := s.Sweep(ctx)
		took := time.Since(start)
		interval := e.cur.Load().node.SweepInterval
		resumes := res.HostResumeMs > 0
		resumeIn := time.Duration(res.HostResumeMs-nowMs()) * time.Millisecond
		wait := sweepWait(interval, took, resumes, resumeIn)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-kick:
			t.Stop()
			if gap := kickWait(took, time.Since(start)-took, wait); gap > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(gap):
				}
			}
		}
	}
}

// minResumeWait spaces a sweep for a host's pause end from the sweep before it.
const minResumeWait = 10 * time.Millisecond

// kickWait is how long the sweep loop waits, once a claim found the ready set exhausted
// sinceEnd after a sweep that took took, before it sweeps early: two sweep durations (20 ms at
// least), never past the wait the loop was in (sweepWait, counted from the sweep's end).
func kickWait(took, sinceEnd, wait time.Duration) time.Duration {
	return max(0, min(max(2*took, 20*time.Millisecond), wait-sinceEnd))
}

// sweepWait is how long the sweep loop waits after a sweep that took took: the interval, or
// until a paused host resumes (resumes: in resumeIn) if that is sooner, spaced minResumeWait at
// least;
// and never less than took, so that a sweep longer than the interval (a due set that outgrew
// it: a store of one host whose limit keeps the ready set from filling reads the whole due set)
// leaves worker 0 at least half of its time for results, writes and serving.
func sweepWait(interval, took time.Duration, resumes bool, resumeIn time.Duration) time.Duration {
	wait := interval
	if resumes {
		wait = min(wait, max(resumeIn, minResumeWait))
	}
	return max(wait, took)
}

// kickingFallback is worker 0's index fallback; when the ready set is exhausted (rather than
// cold or disabled) it also asks the sweep loop to run early.
type kickingFallback struct {
	claim.Fallback
	ready *shm.Ready
	kick  chan<- struct{}
}

func (k kickingFallback) ClaimIndex(ctx context.Context, req claim.IndexClaim) ([]claim.Job, error) {
	if st := k.ready.Stats(); st.Enabled && st.Gen > 0 && st.Taken >= st.Count {
		select {
		case k.kick <- struct{}{}:
		default:
		}
	}
	return k.Fallback.ClaimIndex(ctx, req)
}

// belowFloorEvery is how often worker 0 counts the rows below the floor (freshq_below_floor).
// The count reads the due index below the floor, where every row rescheduled since the last
// compaction (Badger) or vacuum (PostgreSQL) left a dead entry: a read that grows with the
// store, which after every sweep delayed the next one.
const belowFloorEvery = 10 * time.Second

// belowFloorAlarm counts (up to a bound) the rows filed below the floor, F1 says there are
// none, at most once per belowFloorEvery. It is called from the sweeper's goroutine only.
type belowFloorAlarm struct {
	st      store.Store
	counted bool  // whether it has counted yet: the first sweep's count is never skipped
	lastMs  int64 // when it last counted
}

// afterSweep counts the rows below the floor if belowFloorEvery has passed since the last
// count (or the clock went back), and reports whether it did.
func (a *belowFloorAlarm) afterSweep(nowMs int64) (n int, counted bool) {
	if a.counted && nowMs >= a.lastMs && nowMs-a.lastMs < belowFloorEvery.Milliseconds() {
		return 0, false
	}
	a.counted, a.lastMs = true, nowMs
	n, err := a.st.RowsBelowFloor(10_000)
	if err != nil {
		return 0, true
	}
	return n, true
}

// listenUnix listens on path, mode 0600, replacing a stale socket left by a killed worker 0.
func listenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// backlogOf reads the due rows of worker 0's last sweep, every lane, from its block (w).
func backlogOf(w *shm.Worker) func() uint64 {
	return func() uint64 {
		n := uint64(0)
		for l := range policy.NumLanes {
			n += w.Load(shm.CounterBacklog + shm.Counter(l))
		}
		return n
	}
}

// freshPage is a row's page as the freshness tuning reads it (intake.FreshPlan, under the
// tuning in force, tu), with the page's own observations for its route's pooled prior.
func freshPage(set *intake.Settings, tu *freshness.Tuning, key []byte, row store.Row, t *store.Target, now int64) (capacity.FreshPage, bool) {
	route, cadenceMs, p, ok := intake.FreshPlan(set, tu, key, row, t, now)
	if !ok {
		return capacity.FreshPage{}, false
	}
	return capacity.FreshPage{Route: route, Lambda: p.ChangesPerHour, Mu: p.RequestsPerHour, CadenceMs: cadenceMs,
		CeilingBaseMs: p.CeilingBaseMs, MinIntervalMs: p.MinIntervalMs, History: freshness.History{Changed: t.Fresh.Changed,
			ChangedHours: t.Fresh.ChangedHours, UnchangedHours: t.Fresh.UnchangedHours}}, true
}
