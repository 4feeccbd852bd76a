// Package testhold lets a test signal a freshq binary that has only just started, before it
// does anything else: the window in which a signal's default action would kill a process that
// has not yet installed its handlers.
//
// In a test build (the build tag testclock, which testkit/testbin gives the binaries the
// end-to-end tests run), Hold waits for SIGUSR1 when EnvHold is set, after announcing itself on
// stderr (Announce). In every other build Hold does nothing and reads no environment, so no
// shipped binary can be made to hold by its environment; TestProductionBinariesLinkNoTestHook
// reads the production binaries to prove it. A binary calls Hold right after installing its
// signal handlers, so a signal sent during the hold shows whether they work.
package testhold

// EnvHold names the environment variable that turns the hold on in a test build.
const EnvHold = "FRESHQ_TEST_HOLD"

// Announce is the line Hold writes to stderr once the process holds.
const Announce = "holding for the test"
