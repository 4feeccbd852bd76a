// Package sdnotify tells systemd how the supervisor is (Type=notify; see deploy/freshq.service):
// READY=1 once worker 0 serves and its first sweep ended, a one-line STATUS= summary from the
// segment, STOPPING=1 at the stop (Notify), and the watchdog's WATCHDOG=1.
//
// # Invariants
//
//   - READY=1 is sent once, and not before worker 0 answered with a sweep done, unless
//     supervisor.ready_timeout passed (logged); never once the stop began.
//   - WATCHDOG=1 is sent only while every worker's heartbeat in the segment advanced within
//     supervisor.watchdog_stall: a stalled worker lets systemd's watchdog act.
//   - It only reads the segment; outside systemd every notification is a no-op.
//
// Everything it reads is passed in (Options): the segment, the pool's size and stop, worker 0's
// status and the two bounds.
package sdnotify
