//go:build linux

package render

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/freshq/freshq/outcome"
)

// Exec is the exec renderer: it runs render.exec.command with the URL appended as the last
// argument and takes the page from stdout. With headless Chromium:
//
//	render:
//	  renderer: exec
//	  exec:
//	    command: [chromium, --headless, --disable-gpu, --no-sandbox, --dump-dom]
//
// runs `chromium --headless --disable-gpu --no-sandbox --dump-dom https://example.com/page` per
// render, and the serialized DOM after scripts ran is the page.
//
// The guarantees:
//   - No shell. The command is started directly and the URL is one argv entry, so nothing in it
//     is interpreted. The URL must be an absolute http(s) URL — which also means it cannot start
//     with "-" and be taken for an option. Its host is checked against render.domains (where the
//     browser goes from there is the browser's business).
//   - The command runs in its own process group. On render.timeout (or ctx ending) the whole
//     group is killed with SIGKILL, so a browser's helper processes die too; when the command
//     exits by itself, anything it left behind in its group is killed as well. The group is
//     killed while the command's own process is still unreaped, so its id cannot have been
//     reused. A descendant that moved to a group of its own escapes the kill; WaitDelay (1 s)
//     then stops waiting for the output pipes it holds.
//   - The process gets SIGKILL if the worker dies (parent-death signal).
//   - stdout is read up to render.max_body; one byte more kills the group and the render is
//     outcome.TooLarge. stderr keeps its last 4 KiB, quoted in Err on failure.
//   - The environment is the worker's plus FRESHQ_DEVICE (the request's device) and
//     FRESHQ_USER_AGENT (that device's User-Agent), for a wrapper script that wants them.
//
// Outcomes: exit 0 with output → outcome.OK, or outcome.Noindex if the page's head has a robots
// meta noindex (stage "body"); exit 0 without output → outcome.Failed at "body"; a non-zero exit,
// a signal, or a command that cannot start → outcome.Failed at "exec"; the deadline →
// outcome.Timeout at "exec". A page the command produced (ok or noindex) has Status 200: it is
// what GET /v1/pages serves, and a stored page must carry a status HTTP can send. Every other
// outcome has Status 0: a process has no HTTP status, so exec never reports not_found or gone.
type Exec struct {
	cfg   Options
	argv  []string
	allow *allowlist
}

// execStderrKeep is how much of stderr's tail a render keeps.
const execStderrKeep = 4 << 10

// NewExec builds the exec renderer. The command's program must be found now (in PATH or as a
// path), so that a missing browser fails at start, not on every render.
func NewExec(cfg Options) (*Exec, error) {
	if err := checkCommon(cfg); err != nil {
		return nil, err
	}
	if len(cfg.ExecCommand) == 0 || cfg.ExecCommand[0] == "" {
		return nil, errors.New("render: the exec renderer needs render.exec.command")
	}
	if _, err := exec.LookPath(cfg.ExecCommand[0]); err != nil {
		return nil, fmt.Errorf("render: exec command: %w", err)
	}
	argv := append([]string(nil), cfg.ExecCommand...)
	return &Exec{cfg: cfg, argv: argv, allow: newAllowlist(cfg.Domains)}, nil
}

// Render runs the command for req.URL. See Exec.
func (e *Exec) Render(ctx context.Context, req Request) (res Result) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	defer recovered(&res, start)
	res.FinalURL = req.URL

	u, err := url.Parse(req.URL)
	switch {
	case err != nil:
		return failed(res, outcome.Failed, StageRequest, "bad URL: "+errText(err))
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return failed(res, outcome.Failed, StageRequest, fmt.Sprintf("bad URL: want http(s)://host/…, got scheme %q host %q", u.Scheme, u.Host))
	case !e.allow.allows(u.Host):
		return failed(res, outcome.Blocked, StagePolicy, fmt.Sprintf("host %q is not in render.domains", u.Hostname()))
	}

	timeout := e.cfg.Timeout
	rctx, cancel := withTimeout(ctx, timeout)
	defer cancel()

	args := make([]string, 0, len(e.argv))
	args = append(args, e.argv[1:]...)
	cmd := exec.CommandContext(rctx, e.argv[0], append(args, req.URL)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		killGroup(cmd.Process.Pid)
		return os.ErrProcessDone // Wait then reports the real exit: a command that finished as the deadline passed succeeded
	}
	cmd.WaitDelay = time.Second
	cmd.Env = append(os.Environ(), "FRESHQ_DEVICE="+req.Device, "FRESHQ_USER_AGENT="+userAgent(&e.cfg, req.Device))
	stdout := &capWriter{limit: int(e.cfg.MaxBody)}
	stdout.overflow = func() { killGroup(cmd.Process.Pid) } // Write runs only after Start set cmd.Process
	stderr := &tailWriter{keep: execStderrKeep}
	cmd.Stdout, cmd.Stderr = stdout, stderr

	if err := cmd.Start(); err != nil {
		if rctx.Err() != nil { // CommandContext does not start a command whose ctx is done
			return failed(res, outcome.Timeout, StageExec, ctxErr(rctx, timeout, StageExec))
		}
		return failed(res, outcome.Failed, StageExec, "start: "+err.Error())
	}
	pid := cmd.Process.Pid
	waitExited(pid) // the leader has exited but is not reaped: pid, and so the group id, stay ours
	killGroup(pid)  // whatever it left running in its group
	err = cmd.Wait()
	exited0 := cmd.ProcessState != nil && cmd.ProcessState.Success()

	switch {
	case stdout.over.Load():
		return failed(res, outcome.TooLarge, StageBody, fmt.Sprintf("output over render.max_body (%d bytes); process group killed", e.cfg.MaxBody))
	case exited0 && (err == nil || errors.Is(err, exec.ErrWaitDelay)):
		// Exited 0. ErrWaitDelay: a descendant outside the group held stdout open; the page the
		// command wrote before exiting has been read.
	case rctx.Err() != nil:
		return failed(res, outcome.Timeout, StageExec, ctxErr(rctx, timeout, StageExec)+"; process group killed"+stderr.quote())
	case err != nil:
		return failed(res, outcome.Failed, StageExec, err.Error()+stderr.quote())
	}
	if len(stdout.buf) == 0 {
		return failed(res, outcome.Failed, StageBody, "exit 0 with no output"+stderr.quote())
	}
	res.Body, res.Stage, res.Status = stdout.buf, StageBody, http.StatusOK
	res.Headers = map[string]string{"content-type": http.DetectContentType(res.Body)}
	if metaNoindex(res.Body) {
		res.Outcome, res.Err = outcome.Noindex, "robots meta tag: noindex"
		return res
	}
	res.Outcome = outcome.OK
	return res
}

// killGroup sends SIGKILL to the process group pgid. It cannot fail in a way that matters: the
// group is ours (Setpgid) and an empty one is already what we want.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// waitExited blocks until process pid has exited, without reaping it (WNOWAIT): until Wait
// reaps it, its pid cannot be reused, so killing its group cannot hit a stranger.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return // nil, or ECHILD if it is somehow gone already: Wait will say
		}
	}
}

// capWriter keeps up to limit bytes; one byte more sets over, calls overflow once and fails the
// write (the copy from the pipe stops).
type capWriter struct {
	limit    int
	buf      []byte
	over     atomic.Bool
	overflow func()
}

func (w *capWriter) Write(p []byte) (int, error) {
	if w.over.Load() {
		return 0, errTooLarge
	}
	if len(w.buf)+len(p) > w.limit {
		w.over.Store(true)
		w.buf = nil
		w.overflow()
		return 0, errTooLarge
	}
	if w.buf == nil {
		w.buf = make([]byte, 0, min(w.limit, 64<<10))
	}
	if len(w.buf)+len(p) > cap(w.buf) { // grow by doubling, never past limit
		grown := make([]byte, len(w.buf), min(max(2*cap(w.buf), len(w.buf)+len(p)), w.limit))
		copy(grown, w.buf)
		w.buf = grown
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// tailWriter keeps the last keep bytes written to it.
type tailWriter struct {
	keep int
	buf  []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > w.keep {
		p = p[len(p)-w.keep:]
	}
	if len(w.buf)+len(p) > 2*w.keep { // compact: keep the tail, in place
		tail := w.buf[len(w.buf)-(w.keep-len(p)):]
		w.buf = append(w.buf[:0], tail...)
	}
	w.buf = append(w.buf, p...)
	return n, nil
}

// quote renders the kept stderr tail for Result.Err: "; stderr: …", or "" when there is none.
func (w *tailWriter) quote() string {
	b := w.buf
	if len(b) > w.keep {
		b = b[len(b)-w.keep:]
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if s == "" {
		return ""
	}
	return "; stderr: " + s
}
