//go:build linux

package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/outcome"
)

// TestMain lets the test binary stand in for a renderer command: run as
// `render.test render-helper MODE ARGS…`, it acts out MODE instead of running tests. Using the
// binary itself (not a shell) shows exactly what argv the exec renderer hands to a program.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "render-helper" {
		helper(os.Args[2], os.Args[3:])
		return
	}
	os.Exit(m.Run())
}

func helper(mode string, args []string) {
	switch mode {
	case "argv": // print the arguments it got, and the environment the renderer adds, as JSON in a page
		out, _ := json.Marshal(map[string]any{"args": args, "device": os.Getenv("FRESHQ_DEVICE"), "ua": os.Getenv("FRESHQ_USER_AGENT")})
		fmt.Printf("<html><head><title>argv</title></head><body>%s</body></html>", out)
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	os.Exit(2)
}

func newExec(t *testing.T, timeout time.Duration, command ...string) *Exec {
	t.Helper()
	cfg := testConfig("exec")
	cfg.Timeout = timeout
	cfg.ExecCommand = command
	cfg.UserAgents = map[string]string{"mobile": "freshq-mobile/1"}
	e, err := NewExec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestExecPassesTheURLVerbatimWithoutAShell(t *testing.T) {
	dir := t.TempDir()
	pwned := filepath.Join(dir, "pwned")
	// Every shell metacharacter we can think of. If anything ran this through a shell, the
	// touch would create the file, the rm would run, the quotes would be eaten.
	url := fmt.Sprintf("http://example.com/a;touch %s;rm -rf %s $(touch %s) `touch %s` 'q' \"d\" |cat &bg >x <y *?~ \\n", pwned, dir, pwned, pwned)
	e := newExec(t, 30*time.Second, os.Args[0], "render-helper", "argv", "--flag=a b")
	res := e.Render(context.Background(), Request{URL: url, Device: "mobile"})
	// A page the command produced is served as a page: 200, never the 0 of "no response".
	expect(t, res, outcome.OK, StageBody, 200)

	start := bytes.Index(res.Body, []byte("<body>")) + len("<body>")
	end := bytes.Index(res.Body, []byte("</body>"))
	var got struct {
		Args       []string
		Device, UA string
	}
	if err := json.Unmarshal(res.Body[start:end], &got); err != nil {
		t.Fatalf("%v in %q", err, res.Body)
	}
	want := []string{"--flag=a b", url}
	if len(got.Args) != 2 || got.Args[0] != want[0] || got.Args[1] != want[1] {
		t.Fatalf("argv %q, want %q", got.Args, want)
	}
	if _, err := os.Stat(pwned); !os.IsNotExist(err) {
		t.Fatal("the URL was interpreted by a shell")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal("the URL was interpreted by a shell:", err)
	}
	if got.Device != "mobile" || got.UA != "freshq-mobile/1" {
		t.Errorf("environment: device %q, user agent %q", got.Device, got.UA)
	}
	if res.Headers["content-type"] != "text/html; charset=utf-8" || res.FinalURL != url {
		t.Errorf("headers %v, FinalURL %q", res.Headers, res.FinalURL)
	}
}

func TestExecRefusesURLsThatCouldBeOptions(t *testing.T) {
	e := newExec(t, 30*time.Second, "true")
	for _, u := range []string{"--remote-debugging-port=9222", "-x", "", "file:///etc/passwd", "example.com"} {
		expect(t, e.Render(context.Background(), Request{URL: u}), outcome.Failed, StageRequest, 0)
	}
	cfg := e.cfg
	cfg.Domains = []string{"example.org"}
	blocked, err := NewExec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, blocked.Render(context.Background(), Request{URL: "http://example.com/"}), outcome.Blocked, StagePolicy, 0)
}

func TestExecFailureKeepsStderr(t *testing.T) {
	e := newExec(t, 30*time.Second, "/bin/sh", "-c", `echo "starting" >&2; echo "chromium: net::ERR_NAME_NOT_RESOLVED" >&2; exit 3`, "sh")
	res := e.Render(context.Background(), Request{URL: "http://example.com/"})
	expect(t, res, outcome.Failed, StageExec, 0)
	if !strings.Contains(res.Err, "exit status 3") || !strings.Contains(res.Err, "ERR_NAME_NOT_RESOLVED") {
		t.Fatalf("Err %q", res.Err)
	}
}

func TestExecEmptyOutputFails(t *testing.T) {
	res := newExec(t, 30*time.Second, "true").Render(context.Background(), Request{URL: "http://example.com/"})
	expect(t, res, outcome.Failed, StageBody, 0)
}

func TestExecNoindex(t *testing.T) {
	e := newExec(t, 30*time.Second, "/bin/sh", "-c", `printf '<html><head><meta name="robots" content="noindex"></head><body>%s</body></html>' "$1"`, "sh")
	res := e.Render(context.Background(), Request{URL: "http://example.com/"})
	expect(t, res, outcome.Noindex, StageBody, 200)
	if !bytes.Contains(res.Body, []byte("http://example.com/")) {
		t.Errorf("body %q", res.Body)
	}
}

func TestExecHangIsKilledWithItsChildren(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	// The command starts a child that would outlive it by a minute, records both pids, and hangs.
	script := `sleep 60 & echo "$$ $!" > "$0"; wait`
	e := newExec(t, 300*time.Millisecond, "/bin/sh", "-c", script, pidfile)
	res := e.Render(context.Background(), Request{URL: "http://example.com/"})
	expect(t, res, outcome.Timeout, StageExec, 0)
	if !strings.Contains(res.Err, "render.timeout 300ms") {
		t.Errorf("Err %q", res.Err)
	}
	if res.Duration > 20*time.Second {
		t.Fatalf("took %s: the timeout did not kill it", res.Duration)
	}
	for _, pid := range readPids(t, pidfile) {
		waitDead(t, pid)
	}
}

func TestExecKillsWhatItLeavesBehind(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	// It prints the page and exits 0, but its background child keeps stdout open: without the
	// group kill, Render would wait for that child (a minute) or WaitDelay.
	script := `sleep 60 & echo "$!" > "$0"; echo "<html><body>$1</body></html>"`
	e := newExec(t, 30*time.Second, "/bin/sh", "-c", script, pidfile)
	res := e.Render(context.Background(), Request{URL: "http://example.com/"})
	expect(t, res, outcome.OK, StageBody, 200)
	if res.Duration > 20*time.Second {
		t.Fatalf("took %s", res.Duration)
	}
	for _, pid := range readPids(t, pidfile) {
		waitDead(t, pid)
	}
}

func TestExecOutputOverTheLimitIsKilled(t *testing.T) {
	cfg := testConfig("exec")
	cfg.Timeout = 30 * time.Second
	cfg.MaxBody = 4096
	cfg.ExecCommand = []string{"yes"} // prints the URL forever
	e, err := NewExec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := e.Render(context.Background(), Request{URL: "http://example.com/"})
	expect(t, res, outcome.TooLarge, StageBody, 0)
	if res.Duration > 20*time.Second {
		t.Fatalf("took %s: the overflow did not kill it", res.Duration)
	}

	cfg.ExecCommand = []string{"/bin/sh", "-c", `head -c 4096 /dev/zero | tr '\0' a`}
	e, _ = NewExec(cfg)
	res = e.Render(context.Background(), Request{URL: "http://example.com/"})
	expect(t, res, outcome.OK, StageBody, 200) // exactly max_body is fine
	if len(res.Body) != 4096 {
		t.Fatalf("%d bytes", len(res.Body))
	}
}

func TestExecCallerCancels(t *testing.T) {
	e := newExec(t, 30*time.Second, "sleep", "60")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := e.Render(ctx, Request{URL: "http://example.com/"})
	expect(t, res, outcome.Timeout, StageExec, 0)
	if !strings.Contains(res.Err, "canceled") {
		t.Errorf("Err %q", res.Err)
	}

	// Cancelled while running: the group is killed.
	ctx, cancel = context.WithCancel(context.Background())
	pidfile := filepath.Join(t.TempDir(), "pids")
	e = newExec(t, 30*time.Second, "/bin/sh", "-c", `echo "$$" > "$0.tmp" && mv "$0.tmp" "$0"; exec sleep 60`, pidfile)
	done := make(chan Result)
	go func() { done <- e.Render(ctx, Request{URL: "http://example.com/"}) }()
	for started := false; !started; {
		select {
		case res := <-done:
			t.Fatalf("returned before it was cancelled: %+v", res)
		default:
		}
		_, err := os.Stat(pidfile)
		started = err == nil
		time.Sleep(time.Millisecond) // waiting for the command to have started, not for time to pass
	}
	cancel()
	res = <-done
	expect(t, res, outcome.Timeout, StageExec, 0)
	if res.Duration > 20*time.Second {
		t.Fatalf("took %s", res.Duration)
	}
	waitDead(t, readPids(t, pidfile)[0])
}

func TestTailWriterKeepsTheTail(t *testing.T) {
	w := &tailWriter{keep: 8}
	for i := range 100 {
		fmt.Fprintf(w, "%d,", i)
	}
	if got := w.quote(); got != "; stderr: 7,98,99," {
		t.Fatalf("got %q", got)
	}
	if cap(w.buf) > 64 {
		t.Fatalf("buffer grew to %d", cap(w.buf))
	}
	w = &tailWriter{keep: 4}
	w.Write([]byte("a long single write"))
	if got := w.quote(); got != "; stderr: rite" {
		t.Fatalf("got %q", got)
	}
	if (&tailWriter{keep: 4}).quote() != "" {
		t.Fatal("empty stderr quoted")
	}
}

func readPids(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Fatal("no pids recorded")
	}
	return pids
}

// waitDead waits until pid is gone or a zombie (killed, and waiting for whoever inherited it to
// reap it). A SIGKILL takes effect within microseconds; the bound is only a backstop.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return // gone
		}
		// The state is the field after the parenthesised command name.
		if i := bytes.LastIndexByte(data, ')'); i > 0 && len(data) > i+2 && (data[i+2] == 'Z' || data[i+2] == 'X') {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d is still alive: %s", pid, data)
		}
		time.Sleep(time.Millisecond)
	}
}
