// Package clock is the clock every freshq process reads, in ms since the Unix epoch.
//
// A production build (no build tags) is the plain wall clock: it reads no environment variable
// and maps no file, and TestClock is false.
//
// Tests that run real processes (the supervisor and its workers) must make time pass without
// sleeping, for example to let a killed worker's leases lapse. For them only, a build with the
// tag testclock (testkit/testbin builds the end-to-end tests' binaries so) reads EnvFile at init:
// it may name a file of 8 bytes holding a little-endian int64 offset in ms, which every process
// maps and adds to the wall clock, so the test moves time for all of them at once by writing the
// file. Unset, even that build is the plain wall clock. The hook is a build tag rather than a
// runtime switch so that no shipped binary can be made to run in the future or the past by its
// environment.
//
// Code whose decisions depend on time takes the time (or a now function) from its caller;
// this package is where the processes' main loops get it.
package clock

import "time"

// EnvFile names the environment variable that names the offset file; only a testclock build
// reads it.
const EnvFile = "FRESHQ_CLOCK_FILE"

// Now is NowMs as a time.Time.
func Now() time.Time { return time.UnixMilli(NowMs()) }
