package sdnotify

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/testkit/timers"
	"github.com/freshq/freshq/wire"
)

// harness runs Run with a clock the test moves, timers the test fires, and the notifications
// it would have sent to systemd recorded in order.
type harness struct {
	t        *testing.T
	seg      *shm.Segment
	now      atomic.Int64 // unix ms
	sweeps   atomic.Uint64
	stopping atomic.Bool
	asked    <-chan timers.Timer
	held     *timers.Timer // the timer Run waits on, taken by next and not yet fired
	mu       sync.Mutex
	sent     []string
	done     chan struct{}
}

// start runs Run; swept says whether worker 0 has finished a sweep before Run first asks.
func start(t *testing.T, workers int, readyTimeout, stall time.Duration, swept bool) *harness {
	t.Helper()
	seg, err := shm.Create(filepath.Join(t.TempDir(), "seg"), shm.Options{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	h := &harness{t: t, seg: seg, done: make(chan struct{})}
	h.now.Store(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC).UnixMilli())
	if swept {
		h.sweeps.Store(1)
	}
	after, asked := timers.New()
	h.asked = asked
	opts := Options{
		Segment: seg,
		Workers: workers,
		Status: func(context.Context) (wire.Status, error) {
			return wire.Status{Sweeps: h.sweeps.Load()}, nil
		},
		Stopping:      h.stopping.Load,
		ReadyTimeout:  readyTimeout,
		WatchdogStall: func() time.Duration { return stall },
		Log:           zerolog.Nop(),
		Now:           func() time.Time { return time.UnixMilli(h.now.Load()) },
		After:         after,
		Send: func(state string) {
			h.mu.Lock()
			h.sent = append(h.sent, state)
			h.mu.Unlock()
		},
	}
	go func() { defer close(h.done); Run(opts) }()
	t.Cleanup(func() {
		h.stopping.Store(true)
		// Run may be waiting on a timer: fire what it asks for until it returns.
		if h.held != nil {
			close(h.held.Fire)
		}
		for {
			select {
			case <-h.done:
				return
			case tm := <-h.asked:
				close(tm.Fire)
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after the stop began")
				return
			}
		}
	})
	return h
}

// next waits for the timer Run asks for next and holds it unfired: Run has done everything
// before that wait.
func (h *harness) next() timers.Timer {
	h.t.Helper()
	select {
	case tm := <-h.asked:
		h.held = &tm
		return tm
	case <-h.done:
		h.t.Fatal("Run returned while a timer was expected")
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run asked for no timer")
	}
	return timers.Timer{}
}

// pass moves the clock by the held timer's duration, fires it, and waits for the next one.
func (h *harness) pass() timers.Timer {
	h.t.Helper()
	tm := *h.held
	h.held = nil
	h.now.Add(tm.D.Milliseconds())
	close(tm.Fire)
	return h.next()
}

func (h *harness) notifications() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.sent...)
}

func (h *harness) count(state string) int {
	n := 0
	for _, s := range h.notifications() {
		if s == state {
			n++
		}
	}
	return n
}

func TestReadyWaitsForTheFirstSweep(t *testing.T) {
	h := start(t, 1, time.Minute, time.Minute, false)
	tm := h.next()
	for range 3 {
		if tm.D != 100*time.Millisecond {
			t.Fatalf("Run waits %v between asks, want 100ms", tm.D)
		}
		if got := h.count("READY=1"); got != 0 {
			t.Fatalf("READY=1 sent %d times before worker 0's first sweep", got)
		}
		tm = h.pass()
	}
	h.sweeps.Store(1)
	h.pass() // Run is at the watchdog's first tick: READY=1 came before it
	if got := h.count("READY=1"); got != 1 {
		t.Fatalf("READY=1 sent %d times after the first sweep, want 1: %q", got, h.notifications())
	}
}

func TestReadyAfterTheReadyTimeoutWithoutASweep(t *testing.T) {
	h := start(t, 1, 250*time.Millisecond, time.Minute, false)
	h.next()
	h.pass() // 100 ms
	h.pass() // 200 ms
	if got := h.count("READY=1"); got != 0 {
		t.Fatalf("READY=1 sent %d times within ready_timeout", got)
	}
	h.pass() // 300 ms: past the timeout, Run is at the watchdog's first tick
	if got := h.count("READY=1"); got != 1 {
		t.Fatalf("READY=1 sent %d times once ready_timeout passed, want 1: %q", got, h.notifications())
	}
}

func TestNoReadyOnceTheStopBegan(t *testing.T) {
	h := start(t, 1, time.Minute, time.Minute, false)
	tm := h.next()
	h.held = nil
	h.stopping.Store(true)
	h.sweeps.Store(1)
	close(tm.Fire)
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once the stop began")
	}
	if got := h.notifications(); len(got) != 0 {
		t.Fatalf("sent %q after the stop began, want nothing", got)
	}
}

func TestWatchdogWithheldWhileAHeartbeatStalls(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", strconv.Itoa(int((20 * time.Second).Microseconds())))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	const stall = 15 * time.Second
	h := start(t, 2, time.Minute, stall, true)
	w0, err := h.seg.Worker(0)
	if err != nil {
		t.Fatal(err)
	}
	w1, err := h.seg.Worker(1)
	if err != nil {
		t.Fatal(err)
	}
	if tm := h.next(); tm.D != 10*time.Second {
		t.Fatalf("watchdog tick %v, want half of WATCHDOG_USEC (10s)", tm.D)
	}
	// 10 s in: both workers within the 15 s bound.
	w0.Beat(h.now.Load())
	h.pass()
	if got := h.count("WATCHDOG=1"); got != 1 {
		t.Fatalf("WATCHDOG=1 sent %d times within the stall bound, want 1: %q", got, h.notifications())
	}
	// 20 s in: worker 1 has not beaten since the start, past the bound. No WATCHDOG=1, and the
	// status line says why.
	w0.Beat(h.now.Load())
	h.pass()
	if got := h.count("WATCHDOG=1"); got != 1 {
		t.Fatalf("WATCHDOG=1 sent %d times, want still 1 while worker 1's heartbeat stalls: %q", got, h.notifications())
	}
	sent := h.notifications()
	if last := sent[len(sent)-1]; !strings.HasPrefix(last, "STATUS=") || !strings.Contains(last, "heartbeat stalled") {
		t.Fatalf("last notification %q, want a STATUS= line naming the stalled heartbeat", last)
	}
	// Worker 1 beats again: WATCHDOG=1 resumes.
	w0.Beat(h.now.Load())
	w1.Beat(h.now.Load())
	h.pass()
	if got := h.count("WATCHDOG=1"); got != 2 {
		t.Fatalf("WATCHDOG=1 sent %d times once every heartbeat advanced again, want 2: %q", got, h.notifications())
	}
}

func TestNotifyReachesTheNotifySocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	Notify("READY=1")
	buf := make([]byte, 64)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); got != "READY=1" {
		t.Fatalf("the notify socket received %q, want READY=1", got)
	}
}
