// Package sweeploop is worker 0's sweep loop: when the sweep (package sweep) runs, not what it
// does. It sweeps at once, then every queue.ready.sweep_interval (as a reload leaves it), early
// when a claim finds the ready set exhausted (KickingFallback), and when a paused host resumes
// if that is sooner; and it counts the rows below the floor after a sweep, at most once per
// belowFloorEvery (BelowFloorAlarm).
//
// Invariants: the wait after a sweep is never shorter than the sweep took, so sweeping takes at
// most half of worker 0 however hard the claims press; an early sweep waits two sweep durations
// (20 ms at least) but never past the sweep the loop was waiting for; the loop is a
// startstop.Service, stopped before the store closes.
package sweeploop
