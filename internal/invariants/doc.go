// Package invariants is freshq's one build switch for self-checks, so that no package keeps a
// pair of build-tagged files of its own.
//
//   - Enabled is true in builds tagged `invariants` and in every race build (any test run with
//     -race). Code guards its expensive self-checks with it: they run whenever the tests run
//     under the race detector, and the compiler removes them from production builds, where the
//     constant is false (Pebble's habit).
//   - Race is true in race builds only. Tests read it to scale work down where the race
//     detector's instrumentation makes each step several times slower, or to loosen a bound
//     that instrumentation distorts (allocation counts).
//
// Both are constants, so a guarded block costs nothing when they are false. Race implies
// Enabled. The package imports nothing, so the lowest layers (shm, store) may use it.
package invariants
