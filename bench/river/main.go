// Command river-bench measures River (the Go job queue on PostgreSQL) on the database freshq is
// compared against, as the peer's own users would run it: River's library with a no-op worker.
//
// One run: migrate River's schema (rivermigrate) and empty its job table; insert -jobs jobs with
// InsertMany in batches of -batch (the insert phase); start a River client with River's
// defaults (only MaxWorkers, which River requires, is set: -max-workers) and time until every
// job has completed (the work phase, counted by River's own completion events, which fire after
// the completer has written the job's state); check in the table that every job completed; print
// one JSON line. CPU is the process's own (getrusage) and, when the server runs on this machine,
// the PostgreSQL server's: the postmaster and its children from /proc (-pg-pid, or found as the
// parent of this session's backend).
//
// It is its own module (bench/river) so that River never becomes a dependency of freshq.
//
//	go run . -dsn "$FRESHQ_TEST_PG_DSN" -jobs 200000
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is the job: it carries its number, as River's own benchmark's job does.
type noopArgs struct {
	Num int `json:"num"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

type options struct {
	dsn               string
	jobs              int
	batch             int
	maxWorkers        int
	fetchCooldown     time.Duration
	fetchPollInterval time.Duration
	pgPID             int
	timeout           time.Duration
	label             string
}

// result is the JSON line a run prints. Per-job CPU is in microseconds; "work" figures cover
// the work phase only, "all" figures the insert and work phases together.
type result struct {
	System            string  `json:"system"`
	Label             string  `json:"label,omitempty"`
	River             string  `json:"river"`
	Jobs              int     `json:"jobs"`
	InsertBatch       int     `json:"insert_batch"`
	MaxWorkers        int     `json:"max_workers"`
	FetchCooldownMs   float64 `json:"fetch_cooldown_ms"`
	FetchPollMs       float64 `json:"fetch_poll_interval_ms"`
	PoolMaxConns      int32   `json:"pool_max_conns"`
	SynchronousCommit string  `json:"synchronous_commit"`
	ServerVersion     string  `json:"server_version"`
	InsertSeconds     float64 `json:"insert_s"`
	WorkSeconds       float64 `json:"work_s"`
	JobsPerSecWork    float64 `json:"jobs_per_s_work"`
	JobsPerSecAll     float64 `json:"jobs_per_s_all"`
	CPUProcInsertS    float64 `json:"cpu_process_insert_s"`
	CPUProcWorkS      float64 `json:"cpu_process_work_s"`
	CPUServerInsertS  float64 `json:"cpu_server_insert_s"`
	CPUServerWorkS    float64 `json:"cpu_server_work_s"`
	CPUProcUsPerJob   float64 `json:"cpu_process_us_per_job_work"`
	CPUServerUsPerJob float64 `json:"cpu_server_us_per_job_work"`
	CPUUsPerJobWork   float64 `json:"cpu_us_per_job_work"`
	CPUUsPerJobAll    float64 `json:"cpu_us_per_job_all"`
	ServerPID         int     `json:"server_pid,omitempty"`
}

func main() {
	var o options
	flag.StringVar(&o.dsn, "dsn", os.Getenv("FRESHQ_TEST_PG_DSN"), "PostgreSQL DSN (default $FRESHQ_TEST_PG_DSN)")
	flag.IntVar(&o.jobs, "jobs", 200_000, "jobs to insert and work")
	flag.IntVar(&o.batch, "batch", 5_000, "jobs per InsertMany")
	flag.IntVar(&o.maxWorkers, "max-workers", 2_000, "the default queue's MaxWorkers (River requires one; 2,000 is what River's own benchmark uses)")
	flag.DurationVar(&o.fetchCooldown, "fetch-cooldown", 0, "Config.FetchCooldown (0: River's default)")
	flag.DurationVar(&o.fetchPollInterval, "fetch-poll-interval", 0, "Config.FetchPollInterval (0: River's default)")
	flag.IntVar(&o.pgPID, "pg-pid", 0, "the postmaster's pid, for the server's CPU (0: the parent of this session's backend)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up after this long")
	flag.StringVar(&o.label, "label", "", "free text copied into the output")
	flag.Parse()
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "river-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out *os.File) error {
	if o.dsn == "" {
		return errors.New("no DSN: pass -dsn or set FRESHQ_TEST_PG_DSN")
	}
	if o.jobs <= 0 || o.batch <= 0 || o.maxWorkers <= 0 {
		return errors.New("-jobs, -batch and -max-workers must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, o.dsn)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer pool.Close()
	r := result{System: "river", Label: o.label, River: riverVersion(), Jobs: o.jobs, InsertBatch: o.batch,
		MaxWorkers: o.maxWorkers, PoolMaxConns: pool.Config().MaxConns}
	if err := describeServer(ctx, pool, &o, &r); err != nil {
		return err
	}
	if err := prepare(ctx, pool); err != nil {
		return err
	}
	client, err := newClient(pool, o, &r)
	if err != nil {
		return err
	}
	completed, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: o.jobs, // every completion fits: a dropped event would stall the count
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	defer unsubscribe()

	cpu0, srv0 := processCPU(), serverCPU(r.ServerPID)
	t0 := time.Now()
	if err := insert(ctx, client, o); err != nil {
		return err
	}
	t1 := time.Now()
	cpu1, srv1 := processCPU(), serverCPU(r.ServerPID)
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("starting the client: %w", err)
	}
	for n := 0; n < o.jobs; n++ {
		select {
		case <-completed:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d jobs completed before the timeout: %w", n, o.jobs, ctx.Err())
		}
	}
	t2 := time.Now()
	cpu2, srv2 := processCPU(), serverCPU(r.ServerPID)
	if err := client.Stop(ctx); err != nil {
		return fmt.Errorf("stopping the client: %w", err)
	}
	if err := checkCompleted(ctx, pool, o.jobs); err != nil {
		return err
	}

	r.InsertSeconds, r.WorkSeconds = t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds()
	r.JobsPerSecWork = float64(o.jobs) / r.WorkSeconds
	r.JobsPerSecAll = float64(o.jobs) / (r.InsertSeconds + r.WorkSeconds)
	r.CPUProcInsertS, r.CPUProcWorkS = cpu1-cpu0, cpu2-cpu1
	if r.ServerPID != 0 {
		r.CPUServerInsertS, r.CPUServerWorkS = srv1-srv0, srv2-srv1
	}
	perJob := 1e6 / float64(o.jobs)
	r.CPUProcUsPerJob = r.CPUProcWorkS * perJob
	r.CPUServerUsPerJob = r.CPUServerWorkS * perJob
	r.CPUUsPerJobWork = (r.CPUProcWorkS + r.CPUServerWorkS) * perJob
	r.CPUUsPerJobAll = (r.CPUProcInsertS + r.CPUProcWorkS + r.CPUServerInsertS + r.CPUServerWorkS) * perJob
	return json.NewEncoder(out).Encode(r)
}

// describeServer records the server's version and synchronous_commit, and finds the
// postmaster: the parent of this session's backend, when that backend is a process here.
func describeServer(ctx context.Context, pool *pgxpool.Pool, o *options, r *result) error {
	var backend int
	err := pool.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('synchronous_commit'), pg_backend_pid()").
		Scan(&r.ServerVersion, &r.SynchronousCommit, &backend)
	if err != nil {
		return fmt.Errorf("asking the server: %w", err)
	}
	r.ServerPID = o.pgPID
	if r.ServerPID == 0 {
		if st, err := readStat("/proc", backend); err == nil {
			r.ServerPID = st.ppid
		} else {
			fmt.Fprintln(os.Stderr, "river-bench: the server is not a process on this machine; its CPU is not reported")
		}
	}
	return nil
}

// prepare brings River's schema up to date and empties the job table, so every run starts
// from the same state whatever ran before on the database.
func prepare(ctx context.Context, pool *pgxpool.Pool) error {
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrating River's schema: %w", err)
	}
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return fmt.Errorf("emptying river_job: %w", err)
	}
	return nil
}

func newClient(pool *pgxpool.Pool, o options, r *result) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	cfg := &river.Config{
		FetchCooldown:     o.fetchCooldown,
		FetchPollInterval: o.fetchPollInterval,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.maxWorkers}},
		Workers:           workers,
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	// Report what ran: a zero setting is River's default.
	r.FetchCooldownMs = float64(cmp.Or(o.fetchCooldown, river.FetchCooldownDefault)) / float64(time.Millisecond)
	r.FetchPollMs = float64(cmp.Or(o.fetchPollInterval, river.FetchPollIntervalDefault)) / float64(time.Millisecond)
	return client, nil
}

func insert(ctx context.Context, client *river.Client[pgx.Tx], o options) error {
	params := make([]river.InsertManyParams, 0, o.batch)
	for i := 0; i < o.jobs; i += o.batch {
		params = params[:0]
		for j := i; j < min(i+o.batch, o.jobs); j++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{Num: j}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("inserting jobs %d..%d: %w", i, i+len(params), err)
		}
	}
	return nil
}

// checkCompleted confirms in the table what the events said.
func checkCompleted(ctx context.Context, pool *pgxpool.Pool, jobs int) error {
	var done, all int
	err := pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FROM river_job").Scan(&done, &all)
	if err != nil {
		return fmt.Errorf("counting completed jobs: %w", err)
	}
	if done != jobs || all != jobs {
		return fmt.Errorf("river_job holds %d jobs, %d completed; want %d, all completed", all, done, jobs)
	}
	return nil
}

// processCPU is this process's user+system CPU seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// serverCPU is the server's CPU seconds, 0 when it is not known.
func serverCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	s, err := treeCPU("/proc", pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, "river-bench:", err)
		return 0
	}
	return s
}

func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/riverqueue/river" {
				return d.Version
			}
		}
	}
	return "unknown"
}
