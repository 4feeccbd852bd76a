// Package nice starts a command at a lower CPU scheduling priority: it rewrites an *exec.Cmd so
// that the command runs under coreutils' nice program, `nice -n N <path> <args...>`.
//
// Invariants: nice execs the command, so its pid, process group, parent-death signal,
// credentials, environment and inherited descriptors (everything else the *exec.Cmd says) are
// the command's own, and every process it forks afterwards inherits the niceness from its
// first instruction — no window at the caller's priority, unlike renicing a pid once started.
// N is added to the caller's niceness (as nice does, capped at 19 by the kernel): a caller that
// already runs niced keeps its command below itself. A command Wrap could not rewrite is left
// exactly as it was, to run at the caller's priority.
package nice

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
)

// program is the coreutils program the command starts under, looked up in the caller's PATH.
const program = "nice"

// ErrNotFound is Find's and Wrap's error when the nice program is not in the caller's PATH.
var ErrNotFound = errors.New("nice: the nice program is not in PATH (coreutils)")

// Find returns the path of the nice program, or an error wrapping ErrNotFound.
func Find() (string, error) {
	path, err := exec.LookPath(program)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return path, nil
}

// Wrap rewrites cmd, not yet started, to start under nice with niceness n added to the
// caller's: its Path becomes nice's, its Args `nice -n n <cmd.Path> <cmd.Args[1:]...>`. An n of
// 0 or less leaves cmd alone (the caller's own priority) and returns nil. Without the nice
// program it leaves cmd alone and returns an error wrapping ErrNotFound.
func Wrap(cmd *exec.Cmd, n int) error {
	if n <= 0 {
		return nil
	}
	path, err := Find()
	if err != nil {
		return err
	}
	var rest []string
	if len(cmd.Args) > 0 {
		rest = cmd.Args[1:]
	}
	cmd.Args = append([]string{path, "-n", strconv.Itoa(n), cmd.Path}, rest...)
	cmd.Path = path
	return nil
}
