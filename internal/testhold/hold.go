//go:build testclock

package testhold

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

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
