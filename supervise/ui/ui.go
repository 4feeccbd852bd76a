package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/console"
	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// Options are the console's dependencies.
type Options struct {
	// Token is the admin token in force: the console's sessions are keyed on it.
	Token   func() string
	Socket  string // worker 0's control socket
	Segment *shm.Segment
	// Stopping reports whether the pool's stop began: the sampler then returns.
	Stopping func() bool
	Log      zerolog.Logger
}

// ErrMissing is returned by New when a dependency is missing.
var ErrMissing = errors.New("ui: missing dependency")

// UI is the console at /ui/ and the series its overview charts.
type UI struct {
	o       Options
	console *console.Console
	series  *console.Ring // the overview's series: one sample a minute (Run)
}

// New is the console (package console) reading the operator API over worker 0's socket, its
// sessions keyed on the admin token in force, its chart the series ring.
func New(o Options) (*UI, error) {
	if o.Token == nil || o.Socket == "" || o.Segment == nil || o.Stopping == nil {
		return nil, fmt.Errorf("%w: Token, Socket, Segment and Stopping", ErrMissing)
	}
	u := &UI{o: o, series: console.NewRing()}
	c, err := console.New(console.Options{
		Token:  o.Token,
		API:    u.workerAPIClient(10 * time.Second),
		Now:    clock.Now,
		Series: u.series.Snapshot,
		Log:    o.Log.With().Str("component", "console").Logger(),
	})
	if err != nil { // the templates are embedded: only a broken build gets here
		panic(err)
	}
	u.console = c
	return u, nil
}

// Console is the console's handler, to mount at console.Prefix; its Authenticated tells a
// request with a session.
func (u *UI) Console() *console.Console { return u.console }

// workerAPIClient is an HTTP client whose requests to http://worker0/… reach worker 0's control
// socket, as the admin listener's proxy sends them: the console's client of the operator API.
func (u *UI) workerAPIClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", u.o.Socket)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     time.Minute,
	}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// SeriesHandler answers GET /v1/series: the ring of one-minute samples the overview charts,
// oldest first.
func (u *UI) SeriesHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	samples := []console.Sample{}
	if u.series != nil {
		samples = u.series.Snapshot()
	}
	json.NewEncoder(w).Encode(map[string]any{"minute_ms": 60000, "samples": samples})
}

// seriesPoll is how often the sampler looks at the clock for a new minute: a sample is taken
// at the first look in each minute of the clock (clock.Now, which tests move).
const seriesPoll = time.Second

// Run keeps the series ring: at each new minute of the clock, a sample of the
// renders per second, backlog and stale share as GET /v1/queue answers them, and the lateness
// ratio of the grants since the last sample from the freshq_lateness_ratio histograms in
// shared memory (the first sample: since the start of the workers' counters). A minute in
// which worker 0 does not answer is sampled from shared memory only.
// It returns once the pool's stop began.
func (u *UI) Run() {
	client := u.workerAPIClient(5 * time.Second)
	lanes := len(console.Lanes)
	prev := make([][]uint64, lanes)
	lastMinute := int64(-1)
	for !u.o.Stopping() {
		now := clock.NowMs()
		if m := now / 60000; m != lastMinute {
			lastMinute = m
			u.series.Add(u.sample(client, now, prev))
		}
		time.Sleep(seriesPoll)
	}
}

// sample takes one sample at now; prev holds each lane's cumulative bucket counts at the last
// sample and is updated.
func (u *UI) sample(client *http.Client, now int64, prev [][]uint64) console.Sample {
	sm := console.Sample{AtMs: now}
	var q wire.QueueView
	if resp, err := client.Get("http://worker0/v1/queue"); err == nil {
		if resp.StatusCode == http.StatusOK {
			json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&q)
		}
		resp.Body.Close()
	}
	for i, lane := range console.Lanes {
		sm.Backlog[i] = q.Backlog[lane]
	}
	if q.Capacity != nil {
		sm.RendersPerSec = q.Capacity.Capacity.PerSecond
	}
	if q.Freshness != nil {
		sm.StaleShare = q.Freshness.StaleShare
	}
	if q.Backlog == nil { // worker 0 did not answer: the backlog gauges are in shared memory too
		w0, _ := u.o.Segment.Worker(0)
		for i := range console.Lanes {
			sm.Backlog[i] = w0.Load(shm.CounterBacklog + shm.Counter(i))
		}
	}
	n := int(u.o.Segment.Layout().Workers)
	for lane := range prev {
		counts := make([]uint64, len(shm.LatenessBuckets)+1)
		for i := range n {
			w, _ := u.o.Segment.Worker(i)
			for b := range counts {
				counts[b] += w.Load(shm.CounterLateness + shm.Counter(lane)*shm.LatenessStride + shm.Counter(b))
			}
		}
		delta := make([]uint64, len(counts))
		for b := range counts {
			if prev[lane] != nil && counts[b] >= prev[lane][b] {
				delta[b] = counts[b] - prev[lane][b]
			} else {
				delta[b] = counts[b]
			}
		}
		prev[lane] = counts
		sm.P90[lane], sm.Worst[lane] = latenessFigures(delta)
	}
	return sm
}

// latenessFigures are the p90 and the worst of one minute's lateness histogram (counts by
// bucket of shm.LatenessBuckets, then +Inf), as bucket upper bounds, -1 standing for +Inf;
// nil, nil for an empty minute.
func latenessFigures(delta []uint64) (p90, worst *float64) {
	total := uint64(0)
	for _, d := range delta {
		total += d
	}
	if total == 0 {
		return nil, nil
	}
	bound := func(b int) *float64 {
		v := -1.0
		if b < len(shm.LatenessBuckets) {
			v = shm.LatenessBuckets[b]
		}
		return &v
	}
	cum := uint64(0)
	for b, d := range delta {
		cum += d
		if p90 == nil && cum*10 >= total*9 {
			p90 = bound(b)
		}
		if d > 0 {
			worst = bound(b)
		}
	}
	return p90, worst
}
