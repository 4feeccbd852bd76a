package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/internal/clock"
)

// A restart of freshq drops no crawler request. The unmodified prerender-node middleware
// (pinned in testdata/prerender-node) sits in front of an Express site, pointed at freshq's
// crawler listener, and a crawler asks the site for a page every 50 ms while the supervisor is
// restarted, and upgraded to a new binary, under it. Every answer must be 200 with the page
// freshq rendered: a request refused (ECONNREFUSED), hung up on, or answered by the
// middleware's error path fails the test. A poller of the admin listener's /healthz holds that
// listener to the same rule.
//
// Two ways through a restart, one test each:
//   - systemd's socket activation: the test plays systemd (fakeSystemd), holding both
//     listening sockets and passing them to each supervisor it starts, as LISTEN_FDS,
//     LISTEN_PID and LISTEN_FDNAMES say; a `systemctl restart` is SIGTERM, wait for the exit,
//     start again, and an upgrade is the same with a new binary at the path;
//   - the handover without systemd: the supervisor binds its own sockets, the binary at its
//     path is replaced, and SIGUSR2 has the running supervisor start the new one with the
//     sockets and stop; twice, so that a supervisor that took over hands over in turn.

// restartNode is one pool (data dir, configuration, segment) whose supervisors come and go.
type restartNode struct {
	t                    *testing.T
	dir, cfgPath, clockF string
	admin, serve         string // the listeners' addresses
	segPath, rt          string
	bin                  string   // the supervisor binary the pool runs (a copy, replaced on upgrade)
	log                  *os.File // every supervisor's and worker's output; a file, which a handed-over supervisor inherits
}

func newRestartNode(t *testing.T) *restartNode {
	t.Helper()
	dir := t.TempDir()
	n := &restartNode{t: t, dir: dir, cfgPath: filepath.Join(dir, "freshq.yaml"), clockF: filepath.Join(dir, "clock"),
		admin: freePort(t), serve: freePort(t), rt: runtimeDirFor(t),
		segPath: filepath.Join("/dev/shm", "freshq-e2e-"+strconv.Itoa(os.Getpid())+"-"+filepath.Base(dir)+".seg")}
	os.WriteFile(n.clockF, make([]byte, 8), 0o600)
	cfg := fmt.Sprintf(`data_dir: %s
listen: %s
workers: 2
shm: {path: %s}
log: {level: info}
%s`, filepath.Join(dir, "data"), n.admin, n.segPath, serveYAML(n.serve, ""))
	if err := os.WriteFile(n.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	binDirHere := filepath.Join(dir, "bin")
	os.Mkdir(binDirHere, 0o755)
	n.bin = filepath.Join(binDirHere, "freshq-supervisor")
	n.installBinary()
	var err error
	if n.log, err = os.Create(filepath.Join(dir, "supervisor.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.log.Close()
		os.Remove(n.segPath)
		os.Remove(n.segPath + ".lock")
		if t.Failed() {
			b, _ := os.ReadFile(n.log.Name())
			t.Logf("supervisors' log:\n%s", lastLogLines(string(b), 60))
		}
	})
	return n
}

// installBinary puts a new copy of the built supervisor at n.bin the way a package manager
// does, by a rename over the old file: a running supervisor keeps its (now deleted) file, and
// whatever starts from the path next runs the new one.
func (n *restartNode) installBinary() {
	n.t.Helper()
	src, err := os.ReadFile(filepath.Join(binDir, "freshq-supervisor"))
	if err != nil {
		n.t.Fatal(err)
	}
	tmp := n.bin + ".new"
	if err := os.WriteFile(tmp, src, 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, n.bin); err != nil {
		n.t.Fatal(err)
	}
}

// command is the supervisor's command line, its output going to the log file.
func (n *restartNode) command(name string, args ...string) *exec.Cmd {
	args = append(args, "--config", n.cfgPath, "--worker-bin", filepath.Join(binDir, "freshq-worker"))
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), clock.EnvFile+"="+n.clockF, "RUNTIME_DIRECTORY="+n.rt)
	cmd.Stdout, cmd.Stderr = n.log, n.log
	return cmd
}

// lockHolder is the pid in the data directory's lock file: the supervisor that holds the pool.
func (n *restartNode) lockHolder() int {
	b, err := os.ReadFile(filepath.Join(n.dir, "data", "supervisor.lock"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// ready reports whether the admin listener says the pool is ready.
func (n *restartNode) ready() bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + n.admin + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitUp waits until the supervisor pid holds the pool and the pool is ready, or fails fast
// when exited is closed first (the supervisor died).
func (n *restartNode) waitUp(pid int, exited <-chan struct{}) error {
	deadline := time.Now().Add(40 * time.Second)
	for n.lockHolder() != pid || !n.ready() {
		select {
		case <-exited:
			return fmt.Errorf("supervisor %d exited before it was ready", pid)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("supervisor %d not ready within 40 s (the lock names %d)", pid, n.lockHolder())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// fakeSystemd holds the two listening sockets as systemd's freshq.socket does, and starts
// supervisors with them: descriptors 3 and 4, LISTEN_FDS=2, LISTEN_FDNAMES=admin:crawler,
// and LISTEN_PID set to the supervisor's own pid (by a shell that sets it to its pid and
// execs the supervisor, which keeps the pid, as systemd sets it between fork and exec).
type fakeSystemd struct {
	files []*os.File
}

func newFakeSystemd(t *testing.T, admin, serve string) *fakeSystemd {
	t.Helper()
	fs := &fakeSystemd{}
	for _, addr := range []string{admin, serve} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.(*net.TCPListener).File()
		ln.Close() // the file holds the socket, as systemd's does
		if err != nil {
			t.Fatal(err)
		}
		fs.files = append(fs.files, f)
	}
	t.Cleanup(func() {
		for _, f := range fs.files {
			f.Close()
		}
	})
	return fs
}

// start runs the supervisor at n.bin with the sockets; the returned channel is closed when it exits.
func (fs *fakeSystemd) start(n *restartNode) (*exec.Cmd, chan struct{}) {
	n.t.Helper()
	cmd := n.command("/bin/sh", "-c", `LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"`, n.bin)
	cmd.ExtraFiles = fs.files
	cmd.Env = append(cmd.Env, "LISTEN_FDS=2", "LISTEN_FDNAMES=admin:crawler")
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	n.t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	return cmd, exited
}

// stopSupervisor is systemctl stop: SIGTERM, and wait for the exit (exit code 0).
func stopSupervisor(t *testing.T, cmd *exec.Cmd, exited <-chan struct{}) error {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		return fmt.Errorf("supervisor %d did not stop within 60 s", cmd.Process.Pid)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("supervisor %d exited %d", cmd.Process.Pid, code)
	}
	return nil
}

// crawlerLoad asks for one of a few pages through the site every 50 ms, each request on its own
// goroutine so that one held in a backlog does not delay the next, and keeps every answer.
type crawlerLoad struct {
	mu       sync.Mutex
	answers  int
	failures []string
	sent     []time.Time // when each crawler request was sent
	stop     chan struct{}
	done     sync.WaitGroup
}

// loadPath is the i-th page the crawler asks for.
func loadPath(i int) string { return fmt.Sprintf("/p/%d", i%4) }

func startCrawlerLoad(site, admin string) *crawlerLoad {
	l := &crawlerLoad{stop: make(chan struct{})}
	client := &http.Client{Timeout: 45 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	record := func(what string, err error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.answers++
		if err != nil {
			l.failures = append(l.failures, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), what, err))
		}
	}
	get := func(url, ua string, check func(int, string) error) error {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("User-Agent", ua)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		return check(resp.StatusCode, string(b))
	}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			l.mu.Lock()
			l.sent = append(l.sent, time.Now())
			l.mu.Unlock()
			l.done.Add(2)
			go func(path string) {
				defer l.done.Done()
				record("crawler GET "+path, get(site+path, googlebot, func(code int, body string) error {
					if want := "site page " + path + " for freshq/1"; code != 200 || !strings.Contains(body, want) {
						return fmt.Errorf("answered %d %.200q, want 200 with the page freshq rendered", code, body)
					}
					return nil
				}))
			}(loadPath(i))
			go func() {
				defer l.done.Done()
				record("admin GET /healthz", get("http://"+admin+"/healthz", "probe", func(code int, body string) error {
					if code != 200 {
						return fmt.Errorf("answered %d %.200q", code, body)
					}
					return nil
				}))
			}()
		}
	}()
	return l
}

// count is how many answers came back so far.
func (l *crawlerLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answers
}

// finish stops the load, waits for every request sent, and fails t with every failed answer
// (and why the run stopped early, if it did).
func (l *crawlerLoad) finish(t *testing.T, early error) {
	t.Helper()
	close(l.stop)
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) > 0 {
		t.Errorf("%d of %d answers failed:\n%s", len(l.failures), l.answers, strings.Join(l.failures, "\n"))
	}
	if early != nil {
		t.Fatal(early)
	}
	t.Logf("%d answers (crawler and admin), none failed", l.answers)
}

// sentWithin is how many crawler requests were sent from start to end.
func (l *crawlerLoad) sentWithin(start, end time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, t := range l.sent {
		if !t.Before(start) && !t.After(end) {
			n++
		}
	}
	return n
}

// duringSwitch fails unless a crawler request was sent while the pool switched supervisors
// (from the old one's stop to the new one's ready): else the run proved nothing.
func (l *crawlerLoad) duringSwitch(start, end time.Time) error {
	if n := l.sentWithin(start, end); n < 1 {
		return fmt.Errorf("no crawler request was sent during the switch (%s)", end.Sub(start))
	}
	return nil
}

// sentSince waits until n crawler requests were sent since start.
func (l *crawlerLoad) sentSince(start time.Time, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for l.sentWithin(start, time.Now()) < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("fewer than %d crawler requests sent in 30 s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// settle lets the load run until a few more answers came back.
func (l *crawlerLoad) settle() error {
	want := l.count() + 20
	deadline := time.Now().Add(30 * time.Second)
	for l.count() < want {
		if time.Now().After(deadline) {
			return errors.New("the load got no answers for 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// siteWithPages starts the Express site in front of n's crawler listener and has freshq render
// the pages the load asks for, so that the load asks for stored pages only.
func siteWithPages(t *testing.T, n *restartNode) string {
	t.Helper()
	site := expressSite(t, npmInstall(t), n.serve, "crawl-token")
	for i := range 4 {
		path := loadPath(i)
		if a := visit(t, site, path, googlebot); a.code != 200 || !strings.Contains(a.body, "site page "+path+" for freshq/1") {
			t.Fatalf("rendering %s before the load: %d %q", path, a.code, a.body)
		}
	}
	return site
}

func TestEndToEndSocketActivatedRestartsDropNoCrawlerRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n := newRestartNode(t)
	systemd := newFakeSystemd(t, n.admin, n.serve)
	cmd, exited := systemd.start(n)
	if err := n.waitUp(cmd.Process.Pid, exited); err != nil {
		t.Fatal(err)
	}
	site := siteWithPages(t, n)
	load := startCrawlerLoad(site, n.admin)
	step := func() error {
		if err := load.settle(); err != nil {
			return err
		}
		// systemctl restart: the old supervisor stops, then a new one starts on the same sockets.
		switchStart := time.Now()
		if err := stopSupervisor(t, cmd, exited); err != nil {
			return err
		}
		// No process accepts now. The new supervisor starts once 10 crawler requests (half a
		// second's) were sent: a start that takes that long, or RestartSec=, and these requests
		// wait in the sockets' backlog, which systemd keeps.
		if err := load.sentSince(time.Now(), 10); err != nil {
			return err
		}
		cmd, exited = systemd.start(n)
		if err := n.waitUp(cmd.Process.Pid, exited); err != nil {
			return err
		}
		if err := load.duringSwitch(switchStart, time.Now()); err != nil {
			return err
		}
		return load.settle()
	}
	var early error
	if early = step(); early == nil { // a restart
		n.installBinary() // an upgrade: the new binary at the path, then systemctl restart
		early = step()
	}
	load.finish(t, early)
	if err := stopSupervisor(t, cmd, exited); err != nil {
		t.Fatal(err)
	}
}

func TestEndToEndUpgradeHandsOverListenersDropsNoCrawlerRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n := newRestartNode(t)
	first := n.command(n.bin)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { first.Wait(); close(exited) }()
	t.Cleanup(func() { first.Process.Kill(); <-exited })
	if err := n.waitUp(first.Process.Pid, exited); err != nil {
		t.Fatal(err)
	}
	// The supervisors that take over are not the test's children: each is stopped by its pid.
	t.Cleanup(func() {
		if pid := n.lockHolder(); pid != 0 && pid != first.Process.Pid {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	site := siteWithPages(t, n)
	load := startCrawlerLoad(site, n.admin)

	upgrade := func(old int, oldExited <-chan struct{}) (int, error) {
		if err := load.settle(); err != nil {
			return 0, err
		}
		n.installBinary()
		switchStart := time.Now()
		if err := syscall.Kill(old, syscall.SIGUSR2); err != nil {
			return 0, err
		}
		select {
		case <-oldExited:
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("supervisor %d did not stop within 30 s of SIGUSR2", old)
		}
		deadline := time.Now().Add(40 * time.Second)
		for n.lockHolder() == old || n.lockHolder() == 0 {
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("no supervisor took the pool over from %d", old)
			}
			time.Sleep(50 * time.Millisecond)
		}
		pid := n.lockHolder()
		if err := n.waitUp(pid, nil); err != nil {
			return 0, err
		}
		// The new supervisor runs the file now at the path, not the replaced one.
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || exe != n.bin {
			return 0, fmt.Errorf("supervisor %d runs %q (%v), want the new %s", pid, exe, err, n.bin)
		}
		if err := load.duringSwitch(switchStart, time.Now()); err != nil {
			return 0, err
		}
		return pid, load.settle()
	}
	pid, early := upgrade(first.Process.Pid, exited)
	if early == nil {
		if code := first.ProcessState.ExitCode(); code != 0 {
			early = fmt.Errorf("the supervisor that handed over exited %d", code)
		}
	}
	if early == nil {
		gone := make(chan struct{})
		go func() {
			for syscall.Kill(pid, 0) == nil && !isZombie(pid) {
				time.Sleep(20 * time.Millisecond)
			}
			close(gone)
		}()
		pid, early = upgrade(pid, gone) // the supervisor that took over hands over in turn
	}
	load.finish(t, early)
	syscall.Kill(pid, syscall.SIGTERM)
	waitFor(t, "the last supervisor to stop", 60*time.Second, func() bool { return syscall.Kill(pid, 0) != nil || isZombie(pid) })
}

// isZombie reports whether pid has exited but was not reaped yet (its parent, a supervisor
// that handed over, is gone, and init reaps it in its own time).
func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// A handover that cannot happen leaves the running supervisor serving: under systemd
// (NOTIFY_SOCKET set), where its exit would end the service, and when the new supervisor does
// not confirm (here: the configuration file is broken by then, so the new one exits 2).
func TestEndToEndRefusedHandoverKeepsServing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n := newRestartNode(t)
	start := func(env ...string) (*exec.Cmd, chan struct{}) {
		cmd := n.command(n.bin)
		cmd.Env = append(cmd.Env, env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-exited })
		if err := n.waitUp(cmd.Process.Pid, exited); err != nil {
			t.Fatal(err)
		}
		return cmd, exited
	}
	refused := func(cmd *exec.Cmd, why string) {
		t.Helper()
		logged := func() int {
			b, _ := os.ReadFile(n.log.Name())
			return strings.Count(string(b), "handover refused")
		}
		before := logged()
		n.installBinary()
		cmd.Process.Signal(syscall.SIGUSR2)
		waitFor(t, "the refusal ("+why+")", 40*time.Second, func() bool { return logged() > before })
		b, _ := os.ReadFile(n.log.Name())
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "handover refused") && strings.Contains(line, why) {
				t.Log(line)
				why = ""
			}
		}
		if why != "" {
			t.Fatalf("no refusal in the log says %q", why)
		}
		if n.lockHolder() != cmd.Process.Pid || !n.ready() {
			t.Fatalf("after a refused handover: the lock names %d, not %d, or the pool is not ready", n.lockHolder(), cmd.Process.Pid)
		}
	}

	cmd, exited := start("NOTIFY_SOCKET=" + filepath.Join(n.dir, "no-systemd-here"))
	refused(cmd, "running under systemd")
	if err := stopSupervisor(t, cmd, exited); err != nil {
		t.Fatal(err)
	}

	cmd, exited = start()
	good, err := os.ReadFile(n.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(n.cfgPath, []byte("workers: [not a number\n"), 0o600)
	refused(cmd, "did not take over")
	os.WriteFile(n.cfgPath, good, 0o600)
	if err := stopSupervisor(t, cmd, exited); err != nil {
		t.Fatal(err)
	}
}
