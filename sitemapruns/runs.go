package sitemapruns

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/sitemap"
	"github.com/freshq/freshq/wire"
)

// Sitemap run limits.
const (
	MaxRuns    = 100 // runs kept for Run
	MaxRunning = 4   // runs in progress at once; more are refused with intake.ErrTooMany
)

// Runs runs sitemap imports in the background: a startstop.Service. Each run works
// under the context Start gave, so Stop (or the end of Start's ctx) cancels every fetch in
// flight; Stop then refuses new runs, waits for the chunk being written to commit, shuts the
// gate every run's write passes, and returns once every run has returned. From then on no run
// writes again: worker 0 stops its runs before it closes the store. Stop without Start and
// Stop twice are no-ops; Submit before Start or after Stop is refused with intake.ErrClosed.
type Runs struct {
	startstop.BaseStartStop

	Targets *intake.Targets // upserts each chunk (UpsertChunk); its Now is the runs'
	// Settings are the runs' settings in force; a run reads them once, at its start.
	Settings func() *Settings
	Client   *http.Client // fetches; nil: sitemap's default client (render.timeout, the address policy)

	mu        sync.Mutex
	runs      map[string]*sitemapRun
	order     []string // run ids, oldest first
	running   int
	accepting bool            // between Start and Stop
	ctx       context.Context // the runs' (Start's), ended by Stop
	gate      *intake.Gate    // every write of a run passes it; shut by Stop
	wg        sync.WaitGroup  // runs in progress
}

var _ startstop.Service = (*Runs)(nil)

// Start accepts runs until Stop or until ctx ends; the runs work under ctx. It fails with
// intake.ErrMissingDependency when Targets or Settings is nil.
func (s *Runs) Start(ctx context.Context) error {
	if s.Targets == nil || s.Settings == nil {
		return fmt.Errorf("%w: sitemap runs need Targets and Settings", intake.ErrMissingDependency)
	}
	ctx, start, done := s.StartInit(ctx)
	if !start {
		return nil
	}
	gate := &intake.Gate{}
	s.mu.Lock()
	s.accepting, s.ctx, s.gate = true, ctx, gate
	s.mu.Unlock()
	scheduled := make(chan struct{})
	go func() {
		defer close(scheduled)
		s.readConfigured(ctx)
	}()
	go func() {
		defer done()
		<-ctx.Done()
		<-scheduled // submits nothing once it has seen the end
		s.mu.Lock()
		s.accepting = false
		s.mu.Unlock()
		gate.Shut() // for good: waits for a chunk being written, admits none after
		s.wg.Wait()
	}()
	return nil
}

// configuredPoll is how often the configured sitemaps' schedule is looked at. Whether a
// sitemap is due is decided by the node's clock (Targets.Now), so a test moves it; this is only
// how soon a due read starts.
const configuredPoll = time.Second

// readConfigured reads the sitemaps of sitemap.urls at start and again each time
// sitemap.refetch has passed since its last read began, by the node's clock, until ctx ends.
// The list and the interval are read from the settings in force at each look, so a reload
// applies to the next one. A sitemap whose run is still going is not started again; one that
// cannot start now (intake.ErrTooMany) is tried at the next look; one refused (its host not under
// render.domains) waits a whole refetch, as its run's report says why.
func (s *Runs) readConfigured(ctx context.Context) {
	last := map[string]int64{} // a sitemap's URL → when its last run started (ms)
	tick := time.NewTicker(configuredPoll)
	defer tick.Stop()
	for {
		set := s.Settings()
		now := s.Targets.Now()
		for _, u := range set.URLs {
			if at, read := last[u]; read && now-at < set.Refetch.Milliseconds() || s.inProgress(u) {
				continue
			}
			_, err := s.Submit(wire.SitemapRequest{URL: u}, nil)
			if errors.Is(err, intake.ErrTooMany) {
				continue
			}
			last[u] = now
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// inProgress reports whether a run of the sitemap at u is going.
func (s *Runs) inProgress(u string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		r.mu.Lock()
		going := r.rep.Status == wire.RunRunning && r.rep.Source == u
		r.mu.Unlock()
		if going {
			return true
		}
	}
	return false
}

type sitemapRun struct {
	mu  sync.Mutex
	rep wire.SitemapRun
}

func (r *sitemapRun) snapshot() wire.SitemapRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.rep
	out.Added.Sample = append([]string(nil), r.rep.Added.Sample...)
	out.Updated.Sample = append([]string(nil), r.rep.Updated.Sample...)
	out.Filtered.Sample = append([]string(nil), r.rep.Filtered.Sample...)
	out.Failed.Sample = append([]wire.SitemapFailItem(nil), r.rep.Failed.Sample...)
	return out
}

// Submit starts a run of req: of the sitemap at req.URL, or, when body is not nil, of the file
// body (a spooled request body, which then belongs to the run, and is removed whatever
// happens). req.URL must be under render.domains and req.Device a known device ("": every
// device the configuration renders, as crawlers of each will come), or Submit returns a *FieldError naming "url" or "device". It returns the run's
// state as it starts, intake.ErrTooMany when MaxRunning runs are in progress, and intake.ErrClosed
// when the runs are not started or are stopping.
func (s *Runs) Submit(req wire.SitemapRequest, body *os.File) (_ wire.SitemapRun, err error) {
	defer func() {
		if err != nil {
			discard(body)
		}
	}()
	set := s.Settings()
	if body == nil {
		u, err := cachekey.NormalizeURL(req.URL)
		if err != nil {
			return wire.SitemapRun{}, intake.NewFieldError("url", err)
		}
		pu, _ := url.Parse(u)
		if !render.Allowed(set.Domains, pu.Host) {
			return wire.SitemapRun{}, intake.NewFieldError("url", fmt.Errorf("host %q is not under render.domains", pu.Host))
		}
		req.URL = u
	}
	if req.Device != "" && !set.Keying.Devices[req.Device] {
		return wire.SitemapRun{}, intake.NewFieldError("device", fmt.Errorf("unknown device %q", req.Device))
	}
	return s.start(req, body)
}

// Run returns the state of the run id, or a *FieldError naming "id" that matches intake.ErrNotFound
// when no such run is kept.
func (s *Runs) Run(id string) (wire.SitemapRun, error) {
	s.mu.Lock()
	run := s.runs[id]
	s.mu.Unlock()
	if run == nil {
		return wire.SitemapRun{}, intake.NewFieldError("id", intake.NewKindError(intake.ErrNotFound,
			fmt.Sprintf("no such run (the last %d are kept)", MaxRuns)))
	}
	return run.snapshot(), nil
}

// discard closes and removes a spooled body.
func discard(f *os.File) {
	if f != nil {
		f.Close()
		os.Remove(f.Name())
	}
}

// start registers a run and launches it under the runs' context.
// start registers a run and starts it. It returns the run as it was accepted (running): a run
// that fails at once must not make the answer to its POST depend on how fast it failed.
func (s *Runs) start(req wire.SitemapRequest, body *os.File) (wire.SitemapRun, error) {
	var b [8]byte
	rand.Read(b[:])
	now := s.Targets.Now
	run := &sitemapRun{rep: wire.SitemapRun{ID: hex.EncodeToString(b[:]), Status: wire.RunRunning, Source: req.URL,
		Device: cmp.Or(req.Device, wire.EveryDevice), StartedMs: now()}}
	if body != nil {
		run.rep.Source = "body"
	}
	s.mu.Lock()
	if !s.accepting {
		s.mu.Unlock()
		return wire.SitemapRun{}, intake.NewKindError(intake.ErrClosed, "worker 0 is stopping; post the sitemap again once it is back")
	}
	if s.running >= MaxRunning {
		n := s.running
		s.mu.Unlock()
		return wire.SitemapRun{}, intake.NewKindError(intake.ErrTooMany, fmt.Sprintf("%d sitemap runs already in progress; retry when one is done", n))
	}
	if s.runs == nil {
		s.runs = map[string]*sitemapRun{}
	}
	s.running++
	s.runs[run.rep.ID] = run
	s.order = append(s.order, run.rep.ID)
	s.evictLocked()
	s.wg.Add(1)
	ctx, gate := s.ctx, s.gate
	accepted := run.snapshot()
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		err := s.execute(ctx, gate, run, req, body)
		if err != nil && ctx.Err() != nil {
			err = errors.New("stopped: worker 0 is shutting down (what was stored before stays; post the sitemap again)")
		}
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
		run.mu.Lock()
		run.rep.Status, run.rep.FinishedMs = wire.RunDone, now()
		if err != nil {
			run.rep.Status, run.rep.Error = wire.RunFailed, err.Error()
		}
		run.mu.Unlock()
	}()
	return accepted, nil
}

// evictLocked drops the oldest finished runs beyond MaxRuns. Running runs are never
// dropped; there are at most MaxRunning of them.
func (s *Runs) evictLocked() {
	for i := 0; len(s.order) > MaxRuns && i < len(s.order); {
		id := s.order[i]
		r := s.runs[id]
		r.mu.Lock()
		done := r.rep.Status != wire.RunRunning
		r.mu.Unlock()
		if !done {
			i++
			continue
		}
		delete(s.runs, id)
		s.order = append(s.order[:i], s.order[i+1:]...)
	}
}

// ingest is the state of one run while it executes: the sitemap.Sink of its walk.
type ingest struct {
	ctx     context.Context // ended by Stop
	gate    *intake.Gate
	s       *Runs
	run     *sitemapRun
	set     *Settings
	keying  intake.Keying
	devices []string // every <url> is filed once for each
	batch   batch    // of the urlset file being read
}

func (s *Runs) execute(ctx context.Context, gate *intake.Gate, run *sitemapRun, req wire.SitemapRequest, body *os.File) error {
	set := s.Settings() // one for the run: its settings and its keys agree
	devices := []string{req.Device}
	if req.Device == "" {
		devices = slices.Sorted(maps.Keys(set.Keying.Devices))
	}
	in := &ingest{ctx: ctx, gate: gate, s: s, run: run, set: set, keying: set.Keying, devices: devices}
	in.batch = batch{in: in, chunk: make([]intake.Item, 0, intake.ChunkItems), keys: make(map[string]bool, intake.ChunkItems)}
	f := &sitemap.Fetcher{Client: s.Client, Options: set.Fetch}
	if body != nil {
		defer discard(body)
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			return err
		}
		return f.WalkBody(ctx, body, in)
	}
	return f.WalkURL(ctx, req.URL, in)
}

// File starts a file: a chunk left by a file that failed part way is dropped with it.
func (in *ingest) File() {
	in.run.mu.Lock()
	in.run.rep.Files++
	in.run.mu.Unlock()
	in.batch.chunk = in.batch.chunk[:0]
	clear(in.batch.keys)
}

// Entry takes one <url> of a file that parsed whole.
func (in *ingest) Entry(e sitemap.Entry) error { return in.batch.entry(e) }

// EndFile lands what is left of the file's URLs.
func (in *ingest) EndFile() error { return in.batch.flush() }

// Filtered counts a child sitemap outside render.domains.
func (in *ingest) Filtered(u string) {
	in.run.mu.Lock()
	in.run.rep.Filtered.Add(u)
	in.run.mu.Unlock()
}

// Failed counts a child sitemap that could not be read.
func (in *ingest) Failed(u, reason string) { in.fail(u, reason) }

func (in *ingest) fail(u, reason string) {
	in.run.mu.Lock()
	in.run.rep.Failed.Add(u, reason)
	in.run.mu.Unlock()
}

func (in *ingest) count(n int) {
	in.run.mu.Lock()
	in.run.rep.URLs += n
	in.run.mu.Unlock()
}

// batch gathers a urlset file's valid URLs into chunks for Targets.UpsertChunk.
type batch struct {
	in      *ingest
	chunk   []intake.Item
	lastmod []int64         // of each item of chunk: its <url>'s <lastmod> (ms), 0 if none or unreadable
	keys    map[string]bool // keys of chunk: a repeated URL flushes first, so a chunk has no duplicate
}

func (b *batch) entry(e sitemap.Entry) error {
	in := b.in
	if e.TooLong {
		in.fail(e.Loc, fmt.Sprintf("a tag longer than %d bytes", sitemap.MaxField))
		in.count(1)
		return nil
	}
	if e.Loc == "" {
		in.fail("", "<url> without <loc>")
		in.count(1)
		return nil
	}
	for _, device := range in.devices {
		item := wire.TargetItem{URL: e.Loc, Device: device, Source: "sitemap"}
		if ms, ok := sitemap.ChangefreqCadence(e.ChangeFreq, in.set.MinTTL); ok {
			item.Interval = json.RawMessage(`"` + ms.String() + `"`)
		}
		p, err := intake.ParseItem(&item, in.keying)
		if err != nil {
			in.fail(e.Loc, err.Error())
			in.count(1)
			return nil
		}
		pu, _ := url.Parse(p.URL)
		if !render.Allowed(in.set.Domains, pu.Host) {
			in.run.mu.Lock()
			in.run.rep.Filtered.Add(p.URL)
			in.run.rep.URLs++
			in.run.mu.Unlock()
			return nil
		}
		if err := b.add(p, lastmodMs(e.LastMod)); err != nil {
			return err
		}
	}
	return nil
}

// add puts one item into the chunk, flushing first a chunk that holds its key already, and
// after it a chunk that is full.
func (b *batch) add(p intake.Item, lastmod int64) error {
	if b.keys[string(p.Key)] {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.keys[string(p.Key)] = true
	b.chunk = append(b.chunk, p)
	b.lastmod = append(b.lastmod, lastmod)
	if len(b.chunk) == intake.ChunkItems {
		return b.flush()
	}
	return nil
}

// flush upserts the chunk through the runs' gate and counts what became of each URL.
func (b *batch) flush() error {
	if len(b.chunk) == 0 {
		return nil
	}
	in := b.in
	landed, err := in.s.Targets.UpsertChunk(in.ctx, in.gate, b.chunk)
	if err != nil {
		return err // intake.ErrClosed, or a *StoreError that names the store
	}
	in.run.mu.Lock()
	for i, l := range landed {
		// The report counts the file's <url>s: one filed for several devices counts as its
		// first device's target did (the others are the same URL, filed the same way).
		if b.chunk[i].Device() != in.devices[0] {
			continue
		}
		in.run.rep.URLs++
		switch u := b.chunk[i].URL; {
		case l.Failed != "":
			in.run.rep.Failed.Add(u, l.Failed)
		case l.Existed:
			in.run.rep.Updated.Add(u)
		default:
			in.run.rep.Added.Add(u)
		}
	}
	in.run.mu.Unlock()
	err = in.s.Targets.DueForLastmod(b.chunk, b.lastmod, landed)
	b.chunk, b.lastmod = b.chunk[:0], b.lastmod[:0]
	clear(b.keys)
	return err
}

// lastmodLayouts are the forms of a sitemap's <lastmod> (W3C Datetime, as sitemaps.org says).
var lastmodLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02"}

// lastmodMs is a <lastmod>'s time in ms, or 0 when it is empty or not a W3C Datetime.
func lastmodMs(v string) int64 {
	v = strings.TrimSpace(v)
	for _, layout := range lastmodLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UnixMilli()
		}
	}
	return 0
}
