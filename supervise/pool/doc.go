// Package pool supervises freshq's worker processes: it forks worker 0 (the store, the API,
// the crawler listener's socket as its descriptor 3) and the render workers, restarts each when
// it dies after a backoff that doubles up to supervisor.backoff_max, and stops them in the order
// that loses no result.
//
// # Invariants
//
//   - A worker dies with the supervisor (Pdeathsig, forked on a thread locked for the child's
//     life) and runs in a process group of its own.
//   - A worker reads the configuration in force (the supervisor's validated copy at
//     WorkerConfig), never the operator's file.
//   - Restarts across all workers are bounded by OTP's restart intensity: more than
//     supervisor.restart_intensity within supervisor.restart_period is fatal (Fatal), and
//     systemd's policy takes over.
//   - Once the stop began (BeginStop) no render worker is (re)started; worker 0 still is until it
//     is told to stop itself (Stop), because the render workers' last results go to it. The
//     check and the launch hold the child's lock, which a signal takes too, so a stop either
//     finds the new process or prevents it.
//   - Stop is ordered: render workers, then the public listener (a callback), then worker 0;
//     each group gets the drain bound plus FlushMargin, then SIGKILL.
//
// Everything it needs is passed in (Options): the binary, the paths the workers get, the
// segment (restarts are counted in each worker's block), the settings in force and a logger.
package pool
