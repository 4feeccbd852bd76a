package sdnotify

import (
	"context"
	"strconv"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/rs/zerolog"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// Options are what the notifier reads.
type Options struct {
	Segment *shm.Segment
	Workers int // the workers whose heartbeats are watched
	// Status asks worker 0 whether it serves (bounded in time by the caller).
	Status func(ctx context.Context) (wire.Status, error)
	// Stopping reports whether the pool's stop began: the notifier then returns.
	Stopping func() bool
	// ReadyTimeout is how long READY=1 waits for worker 0's first sweep (supervisor.ready_timeout).
	ReadyTimeout time.Duration
	// WatchdogStall is how long a heartbeat may stand still before WATCHDOG=1 is withheld
	// (supervisor.watchdog_stall, in force: read at each tick).
	WatchdogStall func() time.Duration
	Log           zerolog.Logger

	// Now, After and Send default to time.Now, time.After and Notify; tests hand in their own
	// so that no test waits for a bound to pass.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	Send  func(state string)
}

func (o *Options) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Send == nil {
		o.Send = Notify
	}
}

// Run sends READY=1 once worker 0 serves and its first sweep finished (or failed, or
// ready_timeout passed), then WATCHDOG=1 at half the watchdog interval for as long as every
// worker's heartbeat keeps advancing, and a one-line STATUS= summary. It returns once the
// pool's stop began.
func Run(o Options) {
	o.defaults()
	deadline := o.Now().Add(o.ReadyTimeout)
	for !o.Stopping() {
		st, err := o.Status(context.Background())
		if err == nil && st.Sweeps+st.SweepFails > 0 {
			break
		}
		if o.Now().After(deadline) {
			o.Log.Warn().Dur("ready_timeout", o.ReadyTimeout).Msg("first sweep not finished; reporting ready anyway")
			break
		}
		<-o.After(100 * time.Millisecond)
	}
	if o.Stopping() {
		return
	}
	o.Send("READY=1")
	o.Log.Info().Msg("ready")
	watchdog(o)
}

// watchdog is Run once ready: the STATUS= line, and WATCHDOG=1 while every heartbeat advances.
func watchdog(o Options) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		interval = 0
	}
	tick := 10 * time.Second
	if interval > 0 {
		tick = interval / 2
	}
	last := make([]uint64, o.Workers)
	lastMove := make([]time.Time, o.Workers)
	for i := range lastMove {
		lastMove[i] = o.Now()
	}
	for !o.Stopping() {
		<-o.After(tick)
		if o.Stopping() {
			return
		}
		healthy := true
		stall := o.WatchdogStall()
		for i := range o.Workers {
			w, err := o.Segment.Worker(i)
			if err != nil {
				continue
			}
			if b := w.Status().Beats; b != last[i] {
				last[i], lastMove[i] = b, o.Now()
			} else if o.Now().Sub(lastMove[i]) > stall {
				healthy = false
			}
		}
		rs := o.Segment.Ready().Stats()
		o.Send("STATUS=" + statusLine(rs, o.Segment.Floor().Load(), healthy))
		if interval > 0 && healthy {
			o.Send("WATCHDOG=1")
		}
	}
}

func statusLine(rs shm.ReadyStats, floor int64, healthy bool) string {
	state := "healthy"
	if !healthy {
		state = "a worker's heartbeat stalled"
	}
	return "gen " + strconv.FormatUint(rs.Gen, 10) + ", ready " + strconv.FormatUint(rs.Taken, 10) + "/" +
		strconv.FormatUint(rs.Count, 10) + ", floor " + time.UnixMilli(floor).UTC().Format(time.RFC3339) + ", " + state
}

// Notify sends state to systemd (sd_notify); nothing when not under systemd.
func Notify(state string) {
	daemon.SdNotify(false, state)
}
