package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// writeStat writes a /proc/<pid>/stat line with the given parent and CPU ticks (USER_HZ=100).
// The command name has a space and a parenthesis, as a process may name itself.
func writeStat(t *testing.T, root, pid string, ppid, utime, stime, cutime, cstime int) {
	t.Helper()
	d := filepath.Join(root, pid)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	// Fields after "(comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime ...
	line := pid + " (postgres: w) x) S " + strconv.Itoa(ppid) + " 1 1 0 -1 4194560 10 0 0 0 " +
		strconv.Itoa(utime) + " " + strconv.Itoa(stime) + " " + strconv.Itoa(cutime) + " " + strconv.Itoa(cstime) + " 20 0 1 0 100 0 0\n"
	if err := os.WriteFile(filepath.Join(d, "stat"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The server's CPU is the postmaster's own, what it has reaped from exited backends, and what its
// live children have used; processes outside the tree do not count.
func TestServerCPU(t *testing.T) {
	root := t.TempDir()
	writeStat(t, root, "100", 1, 10, 5, 200, 100) // postmaster: 0.15 s own, 3 s reaped
	writeStat(t, root, "101", 100, 50, 50, 0, 0)  // a backend: 1 s
	writeStat(t, root, "102", 100, 1, 2, 0, 0)    // the checkpointer: 0.03 s
	writeStat(t, root, "200", 1, 900, 900, 0, 0)  // another process: not counted
	if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := treeCPU(root, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0.15 + 3 + 1 + 0.03; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("treeCPU = %v s, want %v s", got, want)
	}
	if _, err := treeCPU(root, 999); err == nil {
		t.Errorf("treeCPU of a missing pid returned no error")
	}
}
