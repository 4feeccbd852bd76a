package chrome

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/freshq/freshq/render/chrome/netidle"
	"github.com/freshq/freshq/render/chrome/nice"
)

// profilePrefix names a profile directory in the temporary directory, followed by the pid of
// the worker that made it: a worker killed with -9 cannot remove its own, so the next renderer
// started on the machine removes those whose worker is gone (removeStaleProfiles).
const profilePrefix = "freshq-chrome-"

// removeStaleProfiles removes the profile directories of workers that no longer run. Their
// browsers died with them (parent-death signal), so nothing uses them.
func removeStaleProfiles() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), profilePrefix+"*"))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), profilePrefix)
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			killUsing(m)
			_ = os.RemoveAll(m)
		}
	}
}

// browserFlags are what a long-lived headless browser on a closed or metered network needs: no
// GPU, no QUIC (the proxy speaks TCP), nothing that phones home on its own (background
// networking, component updates, sync, crash reports, field trials), no WebRTC past the proxy,
// and shared memory in /tmp rather than a container's small /dev/shm.
var browserFlags = []chromedp.ExecAllocatorOption{
	chromedp.Headless,
	chromedp.DisableGPU,
	chromedp.NoFirstRun,
	chromedp.NoDefaultBrowserCheck,
	chromedp.Flag("disable-quic", true),
	chromedp.Flag("disable-background-networking", true),
	chromedp.Flag("disable-component-update", true),
	chromedp.Flag("disable-sync", true),
	chromedp.Flag("disable-breakpad", true),
	chromedp.Flag("disable-crash-reporter", true),
	chromedp.Flag("disable-domain-reliability", true),
	chromedp.Flag("disable-field-trial-config", true),
	chromedp.Flag("disable-default-apps", true),
	chromedp.Flag("disable-extensions", true),
	chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions"),
	chromedp.Flag("disable-client-side-phishing-detection", true),
	chromedp.Flag("disable-hang-monitor", true),
	chromedp.Flag("disable-popup-blocking", true),
	chromedp.Flag("disable-prompt-on-repost", true),
	chromedp.Flag("disable-background-timer-throttling", true),
	chromedp.Flag("disable-renderer-backgrounding", true),
	chromedp.Flag("disable-backgrounding-occluded-windows", true),
	chromedp.Flag("disable-dev-shm-usage", true),
	chromedp.Flag("metrics-recording-only", true),
	chromedp.Flag("safebrowsing-disable-auto-update", true),
	chromedp.Flag("password-store", "basic"),
	chromedp.Flag("use-mock-keychain", true),
	chromedp.Flag("mute-audio", true),
	chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
	chromedp.Flag("webrtc-ip-handling-policy", "disable_non_proxied_udp"),
}

// browser is one Chromium process (and its helpers, in its own process group) with a fresh
// profile directory, driven over the DevTools pipe. Every field but the counters is set once
// by startBrowser.
type browser struct {
	ctx         context.Context   // the browser's chromedp context: a tab is a child of it
	conn        *chromedp.Browser // its connection; LostConnection closes when the browser goes
	cancel      context.CancelFunc
	cancelAlloc context.CancelFunc
	pgid        int
	dir         string
	proxyUser   string // its egress proxy credentials (egress.newCredentials)
	proxyPass   string
	revoke      func() // ends them, as it closes
	started     time.Time
	closeOnce   sync.Once

	// Under Renderer.mu.
	renders  int        // renders begun on this browser
	inflight int        // renders running on it
	retired  bool       // no new render begins on it; it closes when inflight reaches 0
	idle     []*tabConn // open tabs no render uses (tabs.go)
	// The browser's cache was last cleared then (its start: a new profile's cache is empty);
	// clearAgain: a clear failed, the next render clears it.
	cacheClearedAt time.Time
	clearAgain     bool
	// cacheGen counts the clears of the browser's cache; looks is what second looks found in
	// this generation of it (secondlook.go), nil until one found something.
	cacheGen uint64
	looks    *looks

	// polls are the URLs its renders found to be long-polls, under their own mutex; cleared
	// with the cache.
	polls netidle.LongPolls
}

// startBrowser starts Chromium as cfg says, its every request through the proxy eg, with
// credentials of its own there. The caller closes the browser. Its profile directory is new,
// owned by the account the browser runs as, and removed by close.
func startBrowser(ctx context.Context, cfg *Options, eg *egress) (*browser, error) {
	cred, err := account(cfg.User)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", profilePrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("chrome: profile directory: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chrome: profile directory: %w", err)
		}
	}
	var cmdRef *exec.Cmd
	var held *os.File // EnvSurvive's writer of the DevTools pipe, closed once the browser runs
	var heldErr error
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(cfg.Path),
		chromedp.UserDataDir(dir),
		chromedp.ProxyServer("http://" + eg.addr()),
		// Chromium sends loopback directly unless told not to: then the proxy sees it too.
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		// chromedp adds --no-sandbox for root; the browser never runs as root here.
		chromedp.Flag("no-sandbox", cfg.NoSandbox),
		chromedp.NoInheritEnv, // the worker's secrets (FRESHQ_TOKEN) stay out of the browser
		chromedp.Env("HOME="+dir, "TMPDIR="+dir, "PATH=/usr/local/bin:/usr/bin:/bin"),
		chromedp.CombinedOutput(io.Discard),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			// Its own process group, so that close kills every helper with it; SIGKILL
			// when the worker dies, even by kill -9 (Go sets the parent-death signal after
			// the credentials change, which would otherwise clear it).
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
			if survive() {
				held, heldErr = surviveAttr(cmd, cred)
			}
			// Under nice, which execs it: its helpers inherit the niceness (no nice: package node warns).
			_ = nice.Wrap(cmd, cfg.Nice)
			cmdRef = cmd
		}),
	}, browserFlags...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancel := chromedp.NewContext(allocCtx)
	b := &browser{ctx: bctx, cancel: cancel, cancelAlloc: cancelAlloc, dir: dir, started: time.Now()}
	b.proxyUser, b.proxyPass = eg.newCredentials()
	b.revoke = func() { eg.revoke(b.proxyUser) }
	startErr := make(chan error, 1)
	go func() { startErr <- chromedp.Do(bctx) }() // the first Do starts the browser
	select {
	case err = <-startErr:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if cmdRef != nil && cmdRef.Process != nil {
		b.pgid = cmdRef.Process.Pid
	}
	if held != nil {
		held.Close()
	}
	err = errors.Join(err, heldErr)
	if err != nil {
		b.close()
		return nil, fmt.Errorf("chrome: start %s: %w", cfg.Path, err)
	}
	b.conn = chromedp.FromContext(bctx).Browser
	return b, nil
}

// account resolves the account the browser runs as: none (the worker's own) unless the worker
// runs as root, which Chromium's sandbox refuses and a browser must never have.
func account(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("chrome: render.chrome.user: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("chrome: render.chrome.user %s: %w", name, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("chrome: render.chrome.user %s is root; the browser must not run as root", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// alive reports whether the browser still runs and answers. The connection is lost before the
// browser's context ends: a call that failed for it must already see the browser gone.
func (b *browser) alive() bool {
	if b.ctx.Err() != nil {
		return false
	}
	if b.conn != nil {
		select {
		case <-b.conn.LostConnection:
			return false
		default:
		}
	}
	return true
}

// close kills the browser's process group and anything else still using its profile, then
// removes the profile. Safe to call more than once and from any goroutine.
func (b *browser) close() {
	b.closeOnce.Do(func() {
		if b.pgid > 0 {
			_ = syscall.Kill(-b.pgid, syscall.SIGKILL)
		}
		b.cancel()
		b.cancelAlloc()
		b.revoke()
		killUsing(b.dir)
		for i := 0; i < 50; i++ { // a helper may still write for a moment after the kill
			if err := os.RemoveAll(b.dir); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// killUsing kills every process whose command line names dir as its profile: a helper that left
// the browser's process group. It looks until it finds none.
func killUsing(dir string) {
	want := []byte("--user-data-dir=" + dir)
	for pass := 0; pass < 20; pass++ {
		found := 0
		forEachProc(func(pid int) {
			cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			if err == nil && bytes.Contains(cmdline, want) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				found++
			}
		})
		if found == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func forEachProc(f func(pid int)) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != self {
			f(pid)
		}
	}
}

// rss is the memory of the browser: the proportional set size (Pss, shared pages divided among
// the processes that share them) of every process in its process group, summed, in bytes — the
// figure render.chrome.max_rss bounds. A plain RSS sum would count the shared libraries and
// shared memory of each of its dozen processes again.
func (b *browser) rss() int64 {
	if b.pgid <= 0 {
		return 0
	}
	var total int64
	forEachProc(func(pid int) {
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			return
		}
		// pid (comm) state ppid pgrp …: comm may hold spaces, so count from its closing paren.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			return
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(b.pgid) {
			return
		}
		rollup, err := os.ReadFile(filepath.Join(dir, "smaps_rollup"))
		if err != nil {
			return
		}
		for line := range strings.Lines(string(rollup)) {
			if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				total += kb << 10
				break
			}
		}
	})
	return total
}
