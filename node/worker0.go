package node

import (
	"context"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/assemble/settings"
	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/crawlers"
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/grantlog"
	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/renderlog"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/sitemapruns"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/sweeploop"
	"github.com/freshq/freshq/wire"
)

// worker0 is the store worker: the store, the sweep, the control socket and the crawler
// listener. Its parts are built by its first service (open), once the store is open, and the
// others start and stop them; a part not built (its start not reached) is not stopped.
type worker0 struct {
	e *env

	st         store.Store        // nil until opened
	eng        cluster.Engine     // the cluster capability the store's engine offers; nil on Badger
	member     startstop.Service  // the cluster's membership; nil on Badger
	farm       startstop.Service  // the hosts' limits and pauses across the cluster; nil on Badger
	gc         startstop.Service  // the store's value-log GC
	sweep      *sweeploop.Service // the sweep loop
	srv        *http.Server       // nil until the socket listens
	mux        *http.ServeMux     // the control socket's handlers
	inflight   *handlers          // the control socket's requests in progress
	sitemaps   *sitemapruns.Runs  // sitemap runs, stopped with the control socket (workerStop)
	served     chan<- error       // the control socket's Serve returned (it failed)
	status     *sweepCounts       // the sweeps, for the control socket's status
	capacity   *capacity.Service  // the capacity accounting
	misses     *misses.Flights    // render on miss; stopped before the socket drains
	watch      startstop.Service  // wakes the misses' waiters on another node's commit; nil on Badger
	crawlers   *crawlerListener   // serve.listen; nil when off
	resched    *rescheduleService // moves rows a reload's or a restart's cadences shortened
	closeSt    atomic.Bool        // false when a writer may still run at the stop: see workerStop
	grants     *grantlog.Log      // the cluster's grant log (a test switch); nil: none
	index      claim.Fallback     // the index claims of render workers and remotes (kicks the sweep)
	tuning     *freshness.TuningCell
	granted    func([]byte, int64) // the grant log's claim hook; nil: none
	politeness *hosts.Tracker      // the host table's one writer
	tally      *crawlers.Tally     // what each crawler family got, when worker 0 serves crawlers
	pageTally  *crawlers.PageTally // the same per page, bounded, for the console's page view
}

// sweepCounts are the sweeps counted for the control socket's status.
type sweepCounts struct{ ok, failed atomic.Uint64 }

func newWorker0(e *env, served chan<- error) *worker0 {
	w := &worker0{e: e, served: served, status: &sweepCounts{}}
	w.closeSt.Store(true)
	return w
}

// services is worker 0 as an ordered list: started from the first, stopped from the last.
// Start order and stop order are not mirrors of each other, so a service whose stop comes at
// another place than its start's mirror is two entries, a start-only one and a stop-only one
// (startstop.Func), and the list, read backwards, is the stop order:
//
//	start: open the store (and build the rest) → membership → farm → reconcile, GC → miss
//	       watch → sitemap runs → crawler listener → control socket → capacity recounts →
//	       reschedule → sweep loop
//	stop:  sweep loop → reschedule → farm → membership (a stopping node hands its shards over
//	       at once) → miss watch → render on miss (its waiters answered 503 now) → crawler
//	       listener → control socket with its sitemap runs and requests (workerStop, with its
//	       bounds) → capacity recounts → GC → the store, closed only if no writer is left
func (w *worker0) services() []startstop.Service {
	return []startstop.Service{
		startstop.Func{StartFunc: w.open, StopFunc: w.closeStore},
		startstop.Func{StopFunc: func() {
			if w.gc != nil {
				w.gc.Stop()
			}
		}},
		startstop.Func{StopFunc: func() {
			if w.capacity != nil {
				w.capacity.Stop()
			}
		}},
		startstop.Func{StopFunc: w.stopControl},
		startstop.Func{StopFunc: func() {
			if w.crawlers != nil {
				w.crawlers.Stop()
			}
		}},
		startstop.Func{StopFunc: func() {
			if w.misses != nil {
				w.misses.Stop()
			}
		}},
		startstop.Func{StopFunc: func() {
			if w.watch != nil {
				w.watch.Stop()
			}
		}},
		startstop.Func{StartFunc: func(ctx context.Context) error { return startPart(ctx, "cluster", w.member) },
			StopFunc: func() {
				if w.member != nil {
					w.member.Stop()
				}
			}},
		startstop.Func{StartFunc: func(ctx context.Context) error { return startPart(ctx, "hosts' farm", w.farm) },
			StopFunc: func() {
				if w.farm != nil {
					w.farm.Stop()
				}
			}},
		startstop.Func{StartFunc: w.reconcile},
		startstop.Func{StartFunc: func(ctx context.Context) error { return startPart(ctx, "miss watch", w.watch) }},
		startstop.Func{StartFunc: func(ctx context.Context) error { return wrap("sitemap runs", w.sitemaps.Start(ctx)) }},
		startstop.Func{StartFunc: w.startCrawlers},
		startstop.Func{StartFunc: w.serveControl},
		startstop.Func{StartFunc: func(ctx context.Context) error { return wrap("capacity", w.capacity.Start(ctx)) }},
		startstop.Func{StartFunc: func(ctx context.Context) error { return wrap("reschedule", w.resched.Start(ctx)) },
			StopFunc: func() {
				if w.resched != nil {
					w.resched.Stop()
				}
			}},
		startstop.Func{StartFunc: func(ctx context.Context) error { return w.sweep.Start(ctx) },
			StopFunc: func() {
				if w.sweep != nil {
					w.sweep.Stop()
				}
			}},
	}
}

// open opens the store and builds worker 0's parts on it, in the order their construction
// needs; it starts nothing.
func (w *worker0) open(ctx context.Context) error {
	e := w.e
	cfg := e.cur.Load().Config()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return wrap("data dir", err)
	}
	st, eng, err := e.deps.OpenStore(ctx, cfg)
	if err != nil {
		return wrap("open store", err)
	}
	w.st, w.eng = st, eng
	w.grants, w.granted = e.deps.GrantLog(cfg)
	// Worker 0 is the host table's one writer: every result, local or remote, passes its
	// Applier's Tracker; in a cluster, the farm adopts the other nodes' pauses through it too.
	w.politeness = &hosts.Tracker{Seg: e.seg, Limits: e.hostLimits, Log: e.log}
	// The capacity accounting exists before the membership, whose heartbeats publish its
	// figures; in a cluster its demand counts the shards the node holds.
	w.capacity = capacity.NewService(st, e.policy, e.now, backlogOf(e.worker), e.log)
	// In a cluster the node takes its shards before anything reads or grants them, and learns
	// its share of each host's limit at the same tick.
	w.member, w.farm = e.deps.Cluster.Services(cfg, eng, w.grants, w.politeness, w.capacity)
	// Under queue.policy freshness the recount also tunes the threshold and the ceilings to the
	// measured capacity; the Applier, the demand flush and the explanation read the tuning.
	w.tuning = &freshness.TuningCell{}
	w.capacity.Freshness = &capacity.FreshTuner{Cell: w.tuning,
		Settings: func() capacity.FreshSettings {
			set := e.intakeSettings()
			return capacity.FreshSettings{On: set.Freshness.On, SweepMs: set.SweepInterval.Milliseconds(), StretchFactor: set.Freshness.StretchFactor}
		},
		Page: func(key []byte, row store.Row, t *store.Target, now int64) (capacity.FreshPage, bool) {
			return freshPage(e.intakeSettings(), w.tuning.Load(), key, row, t, now)
		}}
	w.gc = gcService{st: st}

	// Every write of worker 0 also goes through the capacity ledger (demand) and meter
	// (renders completed): cst is the store with its writes reported; st stays the backend
	// for what must know which one it is.
	cst := capacity.WrapStore(st, w.capacity.Ledger, w.capacity.Meter)
	// Every write of worker 0 goes through changes, so that a sweep never publishes a row
	// written after its snapshot (see sweep.Changes).
	changes := sweep.NewChanges()
	if err := w.buildSweep(st, cst, changes); err != nil {
		return err
	}
	return w.buildServices(st, cst, changes.Wrap(cst))
}

// buildSweep builds the sweep loop, and the index claims that ask it for an early sweep.
func (w *worker0) buildSweep(st, cst store.Store, changes *sweep.Changes) error {
	e := w.e
	sweeps := w.status
	// On PostgreSQL the cluster capability counts each shard's rows for the cluster view too, so
	// that the view's readers never count (pgcluster.Cluster.RowsBelowFloor).
	var floors interface{ RowsBelowFloor(limit int) (int, error) } = st
	if c, ok := w.eng.(interface{ RowsBelowFloor(limit int) (int, error) }); ok {
		floors = c
	}
	belowFloor := sweeploop.NewBelowFloorAlarm(floors)
	// The embedded store takes the rows the sweep publishes as hints, so that their results
	// need not read them again; it may, as worker 0 is its only writer. PostgreSQL's rows can
	// be written by other nodes, so it takes none.
	hints, _ := st.(sweep.RowHints)
	sweeper, err := sweep.New(sweep.Options{
		Store: sweep.FromStore(cst, changes), Segment: e.seg, Changes: changes, Hints: hints, Worker: e.worker, Policy: e.policy, Settings: e.sweepSettings, Now: e.now, Log: e.log,
		AfterSweep: func(res sweep.Result, err error) {
			if err != nil {
				sweeps.failed.Add(1)
				return
			}
			sweeps.ok.Add(1)
			if n, counted := belowFloor.AfterSweep(e.now()); counted {
				e.worker.Set(shm.CounterBelowFloor, uint64(n))
			}
		},
	})
	if err != nil {
		return wrap("sweeper", err)
	}
	w.sweep = sweeploop.New(sweeper, func() time.Duration { return e.cur.Load().set.SweepInterval }, e.now)
	// A fallback claim that finds the ready set exhausted asks for an early sweep.
	w.index = sweeploop.KickingFallback{Fallback: &claim.IndexSource{Scanner: st, Segment: e.seg, Policy: e.policy, Settings: e.claimSettings, Now: e.now, Granted: w.granted, Worker: e.worker},
		Ready: e.seg.Ready(), Kick: w.sweep.Kick()}
	return nil
}

// buildServices builds the services of worker 0's control socket and crawler listener on one
// targets service, and registers their handlers.
func (w *worker0) buildServices(st, cst store.Store, writer sweep.Writer) error {
	e := w.e
	locks := &intake.KeyLocks{} // every read-decide-write of worker 0 holds its keys' locks
	// One byte budget for every heavy request of worker 0 (results, bulk targets, sitemap bodies).
	heavy := api.NewLimiter(api.DefaultHeavyBytes, 0)
	// One targets service for every entry point that writes targets: the admin API, sitemap
	// runs, render on miss and the crawler listener.
	targetsSvc, err := intake.NewTargets(intake.TargetsDeps{Store: cst, Writer: writer, Deleter: writer, Locks: locks, Seg: e.seg, Settings: e.intakeSettings, Now: e.now, Tuning: w.tuning})
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
	stale := &apply.StaleMeter{Now: e.now}
	serveReg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "freshq_serve_observed_requests_total",
			Help: "Crawler requests served between two observations of their page's content, counted at the second."},
			func() float64 { served, _ := stale.Totals(); return served }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "freshq_serve_stale_requests_total",
			Help: "Of freshq_serve_observed_requests_total, those served after the content had changed (expected)."},
			func() float64 { _, st := stale.Totals(); return st }))
	// In a cluster another node may render a miss waited for here: its commit wakes the waiter.
	w.watch = e.deps.Cluster.MissWatch(w.eng, w.misses)
	// Render verdicts: the suspect renders not applied are kept in worker 0's memory for
	// inspection (apply.Suspects says why memory), and counted with worker 0's own series.
	renders := renderlog.New(func() time.Time { return time.UnixMilli(e.now()) })
	applier, err := apply.NewApplier(apply.ApplierDeps{Store: cst, Writer: writer, Locks: locks, Seg: e.seg,
		Settings: e.intakeSettings, Now: e.now, Log: e.log, Misses: w.misses, Hosts: w.politeness, Stale: stale, Tuning: w.tuning,
		Suspects: apply.NewSuspects(), Verdicts: newVerdictMetrics(serveReg), Renders: renders,
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
	if err := w.register(st, targetsSvc, applier, heavy, stale, renders); err != nil {
		return err
	}
	w.mux.Handle("GET "+wire.PathServeMetrics, promhttp.HandlerFor(serveReg, promhttp.HandlerOpts{}))
	return w.buildCrawlers(cst, writer, locks, targetsSvc, serveReg)
}

// register registers the control socket's handlers.
func (w *worker0) register(st store.Store, targetsSvc *intake.Targets, applier *apply.Applier, heavy *api.Limiter, stale *apply.StaleMeter, renders *renderlog.Log) error {
	e := w.e
	sweeps := w.status
	control := &api.Control{
		Index:   w.index,
		Applier: applier,
		Targets: targetsSvc,
		Limit:   heavy,
		Status: func() wire.Status {
			return wire.Status{Serving: true, Sweeps: sweeps.ok.Load(), SweepFails: sweeps.failed.Load()}
		},
		Log: e.log,
	}
	mux := http.NewServeMux()
	w.mux = mux
	w.inflight = &handlers{}
	control.Register(mux)
	(&api.Targets{Targets: targetsSvc, Limit: heavy}).Register(mux)
	w.sitemaps = &sitemapruns.Runs{Targets: targetsSvc, Settings: e.sitemapSettings}
	(&api.Sitemaps{Runs: w.sitemaps, Limit: heavy}).Register(mux)
	(&api.Operate{Targets: targetsSvc, Misses: w.misses}).Register(mux)
	// Remote renderers claim like a render worker would, counted in worker 0's block.
	// Each remote claims under its own holder id (intake.RemoteHolder), capped by queue.max_remote_leases.
	remoteClaimer, err := claim.New(claim.Options{Segment: e.seg, Worker: e.worker,
		Fallback: w.index, Settings: e.claimSettings, Now: e.now, Holder: uint64(os.Getpid())<<16 | 0xffff, Granted: w.granted})
	if err != nil {
		return wrap("remote claimer", err)
	}
	(&api.Remote{Applier: control.Applier, Limit: heavy, Claimer: remoteClaimer}).Register(mux)
	(&api.Renders{Log: renders}).Register(mux)
	view := e.deps.Cluster.View(w.eng, e.cur.Load().Config(), func() float64 { return e.policy().Boost() })
	if e.serveFD > 0 {
		w.tally = &crawlers.Tally{}
		w.pageTally = &crawlers.PageTally{}
	}
	(&api.Pages{Targets: targetsSvc, Crawlers: w.pageTally}).Register(mux)
	(&api.Queue{Seg: e.seg, Now: e.now, Cluster: view, Capacity: w.capacity.View, Settings: e.intakeSettings, Stale: stale, Crawlers: w.tally}).Register(mux)
	(&api.Capacity{View: w.capacity.View}).Register(mux)
	(&api.Plan{Compute: settings.PlanFunc(w.capacity)}).Register(mux)
	(&api.Cluster{View: view}).Register(mux)
	(&api.Keys{Targets: targetsSvc}).Register(mux)
	(&api.Explain{Targets: targetsSvc}).Register(mux)
	(&api.Suspects{Applier: applier}).Register(mux)
	return nil
}

// buildCrawlers builds the crawler listener when worker 0 has one (serve.listen): it serves
// pages itself, one store read from the request, on the socket the supervisor listens on (so
// it outlives a restart of worker 0).
func (w *worker0) buildCrawlers(cst store.Store, writer sweep.Writer, locks *intake.KeyLocks, targetsSvc *intake.Targets, serveReg *prometheus.Registry) error {
	e := w.e
	if e.serveFD <= 0 {
		return nil
	}
	demand, err := intake.NewDemand(intake.DemandDeps{Store: cst, Writer: writer, Locks: locks, Settings: e.intakeSettings, Now: e.now, Tuning: w.tuning})
	if err != nil {
		return wrap("demand", err)
	}
	w.crawlers = &crawlerListener{e: e, reg: serveReg, targets: targetsSvc, misses: w.misses, demand: demand, tally: w.tally, pages: w.pageTally}
	return nil
}

// reconcile re-files the targets whose schedule row is missing, then starts the store's GC.
func (w *worker0) reconcile(ctx context.Context) error {
	if restored, err := w.st.Reconcile(w.e.now()); err != nil {
		w.e.log.Error().Err(err).Msg("reconcile failed")
	} else if restored > 0 {
		w.e.log.Warn().Int("restored", restored).Msg("reconcile re-filed targets whose schedule row was missing")
	}
	_ = w.gc.Start(ctx)
	return nil
}

func (w *worker0) startCrawlers(ctx context.Context) error {
	if w.crawlers == nil {
		return nil
	}
	return wrap("crawler listener", w.crawlers.Start(ctx))
}

// serveControl serves the control socket.
func (w *worker0) serveControl(context.Context) error {
	e := w.e
	ln, err := listenUnix(e.socketPath)
	if err != nil {
		return wrap("control socket", err)
	}
	w.srv = &http.Server{Handler: w.inflight.wrap(w.mux), ReadHeaderTimeout: 10 * time.Second}
	go func() { w.served <- w.srv.Serve(ln) }()
	e.log.Info().Str("socket", e.socketPath).Str("data_dir", e.cur.Load().Config().DataDir).Msg("store worker serving")
	return nil
}

// stopControl stops the control socket, its sitemap runs and its handlers (workerStop, with its
// bounds), and says whether the store may be closed.
func (w *worker0) stopControl() {
	if w.srv == nil {
		return
	}
	stop := &workerStop{srv: w.srv, inflight: w.inflight, sitemaps: w.sitemaps, log: w.e.log, after: time.After,
		drain: w.e.cur.Load().Config().Supervisor.ShutdownTimeout.D()}
	w.closeSt.Store(stop.run())
	os.Remove(w.e.socketPath)
}

// closeStore closes the store, if it was opened and no writer is left (see workerStop.run).
func (w *worker0) closeStore() {
	if w.st == nil || !w.closeSt.Load() {
		return
	}
	if err := w.st.Close(); err != nil {
		w.e.log.Error().Err(err).Msg("closing the store")
	}
}

// startPart starts one of the cluster's parts, which a node whose store offers no cluster (Badger)
// does not have: nil is nothing to start.
func startPart(ctx context.Context, what string, part startstop.Service) error {
	if part == nil {
		return nil
	}
	return wrap(what, part.Start(ctx))
}
