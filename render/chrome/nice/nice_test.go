package nice

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// niceness is field 19 of /proc/<pid>/stat ("self" for this process), counted from the
// closing paren of the command name, which may hold spaces.
func niceness(t *testing.T, pid string) int {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	n, err := strconv.Atoi(f[16]) // f[0] is field 3 (state)
	if err != nil {
		t.Fatalf("/proc/%s/stat: %q", pid, stat)
	}
	return n
}

// needNice is the nice program's path. A machine without coreutils' nice skips the test, CI
// fails it: CI's machine has it, and a test that never ran there proves nothing.
func needNice(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("nice")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and there is no nice program: %v", err)
		}
		t.Skipf("no nice here: %v", err)
	}
	return path
}

// Wrap makes the command nice's: nice's path, then -n N, the command's resolved path and its
// arguments, in their order; what else the command says is untouched.
func TestWrapRewritesPathAndArgs(t *testing.T) {
	nicePath := needNice(t)
	cmd := exec.Command("sh", "-c", "echo a b", "x")
	shPath, dir, env := cmd.Path, t.TempDir(), []string{"A=1"}
	cmd.Dir, cmd.Env = dir, env
	if err := Wrap(cmd, 7); err != nil {
		t.Fatal(err)
	}
	if cmd.Path != nicePath {
		t.Errorf("Path %q, want %q", cmd.Path, nicePath)
	}
	if want := []string{nicePath, "-n", "7", shPath, "-c", "echo a b", "x"}; !reflect.DeepEqual(cmd.Args, want) {
		t.Errorf("Args %q, want %q", cmd.Args, want)
	}
	if cmd.Dir != dir || !reflect.DeepEqual(cmd.Env, env) {
		t.Errorf("Dir %q, Env %q changed", cmd.Dir, cmd.Env)
	}
}

// Niceness 0 is the caller's own priority: the command is not touched at all.
func TestWrapZeroLeavesTheCommandAlone(t *testing.T) {
	cmd := exec.Command("sh", "-c", "true")
	path, args := cmd.Path, slices.Clone(cmd.Args)
	if err := Wrap(cmd, 0); err != nil {
		t.Fatal(err)
	}
	if cmd.Path != path || !reflect.DeepEqual(cmd.Args, args) {
		t.Fatalf("niceness 0 rewrote the command: %q %q", cmd.Path, cmd.Args)
	}
}

// Without the nice program Wrap says so (ErrNotFound, as Find does) and leaves the command as it
// was, to run at the caller's priority.
func TestWrapWithoutNiceReportsItAndLeavesTheCommand(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "true")
	path, args := cmd.Path, slices.Clone(cmd.Args)
	t.Setenv("PATH", t.TempDir()) // no nice in it
	if _, err := Find(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Find without nice: %v, want ErrNotFound", err)
	}
	err := Wrap(cmd, 10)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Wrap without nice: %v, want ErrNotFound", err)
	}
	if cmd.Path != path || !reflect.DeepEqual(cmd.Args, args) {
		t.Fatalf("a failed Wrap rewrote the command: %q %q", cmd.Path, cmd.Args)
	}
}

// The wrapped command runs as the process started (nice execs it: the shell's $$ is the pid the
// caller holds) at the caller's niceness plus N, and a process it forks has the same.
func TestWrappedCommandRunsNicedAndItsChildrenToo(t *testing.T) {
	needNice(t)
	want := min(niceness(t, "self")+5, 19)
	cmd := exec.Command("/bin/sh", "-c", `echo $$; cat /proc/$$/stat; cat /proc/self/stat`)
	if err := Wrap(cmd, 5); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("output %q", out.String())
	}
	if lines[0] != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("the shell is pid %s, the started process %d: nice did not exec it", lines[0], cmd.Process.Pid)
	}
	for i, who := range []string{"the command", "its child"} {
		stat := []byte(lines[i+1])
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if got, _ := strconv.Atoi(f[16]); got != want {
			t.Errorf("%s runs at niceness %d, want %d: %s", who, got, want, stat)
		}
	}
}
