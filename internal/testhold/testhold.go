// Package testhold lets a test signal a freshq binary that has only just started, before it
// does anything else: the window in which a signal's default action would kill a process that
// has not yet installed its handlers.
//
// With EnvHold set, Hold announces itself on stderr (Announce) and waits for SIGUSR1 before it
// returns. Unset, it returns at once and touches nothing. A binary calls it right after
// installing its signal handlers, so a signal sent during the hold shows whether they work.
package testhold

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// EnvHold names the environment variable that turns the hold on.
const EnvHold = "FRESHQ_TEST_HOLD"

// Announce is the line Hold writes to stderr once the process holds.
const Announce = "holding for the test"

// Hold waits for SIGUSR1 when EnvHold is set, and returns at once otherwise.
func Hold() {
	if os.Getenv(EnvHold) == "" {
		return
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	fmt.Fprintln(os.Stderr, Announce)
	<-usr1
}
