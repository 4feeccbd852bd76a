package api

// Sitemap runs: POST /v1/sitemaps and GET /v1/sitemaps/{id}. Reading a sitemap (fetching,
// decompressing under a bound, following an index, parsing) is package sitemap's, and its doc
// says how each threat of untrusted XML is met; a run takes what it reads and upserts it.
//
// Nothing is half-written: package sitemap hands over no entry of a file that does not parse
// to its end, so a malformed or truncated file lands nothing (the run fails with the parser's
// reason). An index's children are files of their own: a bad child is one failure of the run,
// its siblings still land. URLs go to the store in chunks of targetsChunk, so memory stays flat
// whatever the file's size.
//
// A 50,000-URL import takes longer than an HTTP request should, so POST starts a run and answers
// 202 with its id; the run proceeds in a goroutine and GET reports its progress and result. The
// last maxSitemapRuns runs are kept in memory (worker 0 restarting forgets them; re-posting a
// sitemap is harmless because upserts never reset a due time). <loc> is the target and
// <changefreq> its cadence (sitemap.ChangefreqCadence).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/freshq/freshq/intake"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"sync"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/sitemap"
	"github.com/freshq/freshq/wire"
)

// Sitemap run limits.
const (
	maxSitemapBody    = 64 << 20 // a posted sitemap body, compressed or not
	maxSitemapRequest = 64 << 10 // a JSON request {"url": ...}
	sitemapPostHeld   = 1 << 20  // what a POST holds in memory: the body is spooled to disk
	maxSitemapRuns    = 100      // runs kept for GET
	maxSitemapRunning = 4        // runs in progress at once; more are refused with 429
)

// Sitemaps serves /v1/sitemaps. Its runs belong to it: each runs under a context Close
// cancels, and Close returns only once none of them can write again, so that worker 0 stops
// them before it closes the store.
type Sitemaps struct {
	Targets *Targets
	Policy  func() *policy.Policy
	Now     func() int64
	Client  *http.Client // nil: a client with render.timeout
	Limit   *Limiter     // heavy requests of worker 0 (a posted body); nil: none

	mu      sync.Mutex
	runs    map[string]*sitemapRun
	order   []string // run ids, oldest first
	running int
	ctx     context.Context // the runs'; cancelled by Close
	cancel  context.CancelFunc
	closed  bool
	stopped chan struct{}  // closed once Close holds the gate and the runs returned
	wg      sync.WaitGroup // runs in progress
	// gate admits every upsert of a run and is shut by Close: once it is shut, no run writes
	// again, whether or not the runs have returned yet.
	gate intake.Gate
}

// ErrSitemapsClosed is returned for a run started, or a write attempted, after Close.
var ErrSitemapsClosed = intake.ErrClosed

// Close stops the sitemap runs: it refuses new ones, cancels those in progress, waits for any
// upsert in flight to commit, and then for the runs to return, bounded by ctx. When it returns,
// whatever ctx did, no run writes again; it returns ctx's error if runs were still unwinding
// (they only clean up their temporary files and report). Safe to call twice, or without a run.
func (s *Sitemaps) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		if s.cancel != nil {
			s.cancel()
		}
		s.stopped = make(chan struct{})
		go func(done chan struct{}) {
			s.gate.Shut() // for good: the runs' writes are over
			s.wg.Wait()
			close(done)
		}(s.stopped)
	}
	done := s.stopped
	s.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("api: sitemap runs still stopping: %w", ctx.Err())
	}
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

// Register adds the endpoints to mux.
func (s *Sitemaps) Register(mux *http.ServeMux) {
	mux.Handle("POST /v1/sitemaps", s.Limit.Wrap(sitemapPostHeld, http.HandlerFunc(s.post)))
	mux.HandleFunc("GET /v1/sitemaps/{id}", s.get)
}

// post starts a run from {"url": ...} or from an XML body (gzip accepted).
func (s *Sitemaps) post(w http.ResponseWriter, r *http.Request) {
	pol := s.Policy()
	cfg := pol.Config()
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var (
		req  wire.SitemapRequest
		body *os.File
	)
	switch ct {
	case "", "application/json":
		if !decodeJSON(w, r, &req, maxSitemapRequest) {
			return
		}
		u, err := cachekey.NormalizeURL(req.URL)
		if err != nil {
			writeError(w, http.StatusBadRequest, "url", err.Error())
			return
		}
		pu, _ := url.Parse(u)
		if !render.Allowed(cfg.Render.Domains, pu.Host) {
			writeError(w, http.StatusBadRequest, "url", fmt.Sprintf("host %q is not under render.domains", pu.Host))
			return
		}
		req.URL = u
	case "application/xml", "text/xml", "application/gzip", "application/x-gzip":
		req.Device = r.URL.Query().Get("device")
		f, err := os.CreateTemp("", "freshq-sitemap-*")
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "", "spooling the body: "+err.Error())
			return
		}
		n, err := io.Copy(f, http.MaxBytesReader(w, r.Body, maxSitemapBody))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			discard(f)
			writeError(w, http.StatusRequestEntityTooLarge, "", fmt.Sprintf("body over %d bytes; post the sitemap's URL instead", maxSitemapBody))
			return
		case err != nil:
			discard(f)
			writeError(w, http.StatusBadRequest, "", "reading the body: "+err.Error())
			return
		case n == 0:
			discard(f)
			writeError(w, http.StatusBadRequest, "", "empty body")
			return
		}
		body = f
	default:
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type", "use application/json {\"url\": ...} or an application/xml body")
		return
	}
	if req.Device == "" {
		req.Device = config.DefaultDevice
	}
	if !intake.Devices(cfg)[req.Device] {
		discard(body)
		writeError(w, http.StatusBadRequest, "device", fmt.Sprintf("unknown device %q", req.Device))
		return
	}
	run, err := s.start(req, body)
	if errors.Is(err, ErrSitemapsClosed) {
		discard(body)
		writeError(w, http.StatusServiceUnavailable, "", "worker 0 is stopping; post the sitemap again once it is back")
		return
	}
	if err != nil {
		discard(body)
		writeError(w, http.StatusTooManyRequests, "", err.Error())
		return
	}
	w.Header().Set("Location", "/v1/sitemaps/"+run.rep.ID)
	writeJSON(w, http.StatusAccepted, map[string]string{"id": run.rep.ID, "status": wire.RunRunning})
}

func (s *Sitemaps) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	run := s.runs[r.PathValue("id")]
	s.mu.Unlock()
	if run == nil {
		writeError(w, http.StatusNotFound, "id", fmt.Sprintf("no such run (the last %d are kept)", maxSitemapRuns))
		return
	}
	writeJSON(w, http.StatusOK, run.snapshot())
}

// discard closes and removes a spooled body.
func discard(f *os.File) {
	if f != nil {
		f.Close()
		os.Remove(f.Name())
	}
}

// start registers a run and launches it. body, when not nil, is the spooled request body and
// belongs to the run.
func (s *Sitemaps) start(req wire.SitemapRequest, body *os.File) (*sitemapRun, error) {
	var b [8]byte
	rand.Read(b[:])
	run := &sitemapRun{rep: wire.SitemapRun{ID: hex.EncodeToString(b[:]), Status: wire.RunRunning, Source: req.URL,
		Device: req.Device, StartedMs: s.Now()}}
	if body != nil {
		run.rep.Source = "body"
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrSitemapsClosed
	}
	if s.running >= maxSitemapRunning {
		s.mu.Unlock()
		return nil, fmt.Errorf("%d sitemap runs already in progress; retry when one is done", s.running)
	}
	if s.runs == nil {
		s.runs = map[string]*sitemapRun{}
		s.ctx, s.cancel = context.WithCancel(context.Background())
	}
	s.running++
	s.runs[run.rep.ID] = run
	s.order = append(s.order, run.rep.ID)
	s.evictLocked()
	s.wg.Add(1)
	ctx := s.ctx
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		err := s.execute(ctx, run, req, body)
		if err != nil && ctx.Err() != nil {
			err = errors.New("stopped: worker 0 is shutting down (what was stored before stays; post the sitemap again)")
		}
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
		run.mu.Lock()
		run.rep.Status, run.rep.FinishedMs = wire.RunDone, s.Now()
		if err != nil {
			run.rep.Status, run.rep.Error = wire.RunFailed, err.Error()
		}
		run.mu.Unlock()
	}()
	return run, nil
}

// evictLocked drops the oldest finished runs beyond maxSitemapRuns. Running runs are never
// dropped; there are at most maxSitemapRunning of them.
func (s *Sitemaps) evictLocked() {
	for i := 0; len(s.order) > maxSitemapRuns && i < len(s.order); {
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
	ctx    context.Context // cancelled by Sitemaps.Close
	s      *Sitemaps
	run    *sitemapRun
	cfg    *config.Config
	devs   map[string]bool
	device string
	batch  batch // of the urlset file being read
}

func (s *Sitemaps) execute(ctx context.Context, run *sitemapRun, req wire.SitemapRequest, body *os.File) error {
	cfg := s.Policy().Config()
	in := &ingest{ctx: ctx, s: s, run: run, cfg: cfg, devs: intake.Devices(cfg), device: req.Device}
	in.batch = batch{in: in, chunk: make([]intake.Item, 0, targetsChunk), keys: make(map[string]bool, targetsChunk)}
	f := &sitemap.Fetcher{Client: s.Client, Config: cfg}
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

// batch gathers a urlset file's valid URLs into chunks for intake.Targets.UpsertChunk.
type batch struct {
	in    *ingest
	chunk []intake.Item
	keys  map[string]bool // keys of chunk: a repeated URL flushes first, so a chunk has no duplicate
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
	item := wire.TargetItem{URL: e.Loc, Device: in.device, Source: "sitemap"}
	if ms, ok := sitemap.ChangefreqCadence(e.ChangeFreq, in.cfg.Sitemap.MinTTL.D()); ok {
		item.Interval = json.RawMessage(`"` + ms.String() + `"`)
	}
	p, err := intake.ParseItem(&item, in.devs)
	if err != nil {
		in.fail(e.Loc, err.Error())
		in.count(1)
		return nil
	}
	pu, _ := url.Parse(p.URL)
	if !render.Allowed(in.cfg.Render.Domains, pu.Host) {
		in.run.mu.Lock()
		in.run.rep.Filtered.Add(p.URL)
		in.run.rep.URLs++
		in.run.mu.Unlock()
		return nil
	}
	if b.keys[string(p.Key)] {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.keys[string(p.Key)] = true
	b.chunk = append(b.chunk, p)
	if len(b.chunk) == targetsChunk {
		return b.flush()
	}
	return nil
}

func (in *ingest) count(n int) {
	in.run.mu.Lock()
	in.run.rep.URLs += n
	in.run.mu.Unlock()
}

// flush upserts the chunk through the runs' gate and counts what became of each URL.
func (b *batch) flush() error {
	if len(b.chunk) == 0 {
		return nil
	}
	in := b.in
	landed, err := in.s.Targets.intake().UpsertChunk(in.ctx, &in.s.gate, b.chunk)
	if err != nil {
		return err // ErrSitemapsClosed, or an intake.ErrStore that names the store
	}
	in.run.mu.Lock()
	for i, l := range landed {
		switch u := b.chunk[i].URL; {
		case l.Failed != "":
			in.run.rep.Failed.Add(u, l.Failed)
		case l.Existed:
			in.run.rep.Updated.Add(u)
		default:
			in.run.rep.Added.Add(u)
		}
	}
	in.run.rep.URLs += len(b.chunk)
	in.run.mu.Unlock()
	b.chunk = b.chunk[:0]
	clear(b.keys)
	return nil
}
