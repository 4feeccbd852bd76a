package api

// Sitemap ingest: POST /v1/sitemaps and GET /v1/sitemaps/{id}.
//
// A sitemap is how most operators hand freshq their catalogue, and it is also untrusted input
// from the internet, so the shape of this file follows from three threats:
//
//   - Size. A sitemap file may carry 50,000 URLs and an index 50,000 files. The XML is read token
//     by token (encoding/xml's Decoder; the document is never built) and items go to the store in
//     chunks of targetsChunk, so memory stays flat whatever the file's size.
//   - Compression bombs and runaway indexes. Every file, fetched or posted, gzip or not, is copied
//     to a temporary file through a reader that stops at sitemap.max_decompressed: a bomb is
//     refused after that many bytes, never expanded. Index recursion stops at sitemap.max_depth
//     levels of index files, a file is read at most once per run, and a run reads at most
//     maxSitemapFiles files.
//   - SSRF. The submitted URL, each redirect and each child sitemap must be under render.domains,
//     like the http renderer's fetches; a <loc> outside it is counted as filtered, not stored.
//
// Nothing is half-written: each file is parsed to the end once before any of its URLs is
// upserted, so a malformed or truncated file lands nothing (it fails with the parser's reason).
// An index's children are files of their own: a bad child is one failure of the run, its
// siblings still land.
//
// A 50,000-URL import takes longer than an HTTP request should, so POST starts a run and answers
// 202 with its id; the run proceeds in a goroutine and GET reports its progress and result. The
// last maxSitemapRuns runs are kept in memory (worker 0 restarting forgets them; re-posting a
// sitemap is harmless because upserts never reset a due time).
//
// Of the sitemaps.org tags, <loc> is the target and <changefreq> becomes its cadence (floored at
// sitemap.min_ttl, so a site claiming "always" cannot make freshq re-render every page hourly).
// <lastmod> and <priority> are parsed and ignored: lastmod is unreliable in the wild (many sites
// stamp every URL with the generation time) and the cadence, not a change date, decides when a
// page is rendered; priority is relative within a site and the lanes already decide order.
// Extension namespaces (image, news, video, xhtml:link) are skipped.

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/wire"
)

// Sitemap ingest limits.
const (
	maxSitemapBody    = 64 << 20 // a posted sitemap body, compressed or not
	maxSitemapRequest = 64 << 10 // a JSON request {"url": ...}
	sitemapPostHeld   = 1 << 20  // what a POST holds in memory: the body is spooled to disk
	maxSitemapRuns    = 100      // runs kept for GET
	maxSitemapRunning = 4        // runs in progress at once; more are refused with 429
	maxSitemapFiles   = 10_000   // files one run may read (index children included)
	sitemapSample     = 10       // URLs listed per outcome in a run's report
	// MaxSitemapField bounds the text of one tag (<loc>, <changefreq>, …); longer text is cut
	// and the entry marked TooLong. A URL this long could not be a cache key anyway.
	MaxSitemapField = 8 << 10
	// MaxSitemapToken bounds one token of the XML as the parser reads it: a text node, a tag
	// with its attributes, a comment. The decoder holds a token whole before handing it over,
	// so this is what a file can make worker 0 hold at once; a longer token refuses the file
	// (nothing of it lands) once this many bytes were read, without keeping them.
	MaxSitemapToken = 64 << 10
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
	// gate is read-held by every upsert of a run and write-held by Close: once Close holds
	// it, no run writes again, whether or not the runs have returned yet.
	gate sync.RWMutex
}

// ErrSitemapsClosed is returned for a run started, or a write attempted, after Close.
var ErrSitemapsClosed = errors.New("api: sitemap runs stopped")

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
			s.gate.Lock() // held for good: the runs' writes are over
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
		req.Device = "desktop"
	}
	if !devices(cfg)[req.Device] {
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

// ingest is the state of one run while it executes.
type ingest struct {
	ctx     context.Context // cancelled by Sitemaps.Close
	s       *Sitemaps
	run     *sitemapRun
	cfg     *config.Config
	devs    map[string]bool
	device  string
	client  *http.Client
	visited map[string]bool // files already read in this run
	files   int
}

func (s *Sitemaps) execute(ctx context.Context, run *sitemapRun, req wire.SitemapRequest, body *os.File) error {
	cfg := s.Policy().Config()
	in := &ingest{ctx: ctx, s: s, run: run, cfg: cfg, devs: devices(cfg), device: req.Device, visited: map[string]bool{}}
	in.client = s.client(cfg)
	if body != nil {
		defer discard(body)
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			return err
		}
		f, err := in.spool(body)
		if err != nil {
			return err
		}
		defer discard(f)
		return in.file(f, 1)
	}
	in.visited[req.URL] = true
	return in.fetchFile(req.URL, 1)
}

// client returns the HTTP client of a run: the injected one or a default with render.timeout,
// either way refusing a redirect outside render.domains. The default client dials under
// render's address policy (render.NewTransport): an internal address that render.domains does
// not list is refused at dial time, on every hop, with an error that names the policy only.
// An injected client without a Transport gets the same guard; one with its own Transport is
// used as given.
func (s *Sitemaps) client(cfg *config.Config) *http.Client {
	c := &http.Client{Timeout: cfg.Render.Timeout.D()}
	if s.Client != nil {
		cp := *s.Client
		c = &cp
	}
	domains := cfg.Render.Domains
	if c.Transport == nil {
		t := render.NewTransport(domains)
		t.IdleConnTimeout = 30 * time.Second // a transport per run: its idle connections end soon after it
		c.Transport = t
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("more than 10 redirects")
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to a %s URL", req.URL.Scheme)
		}
		if !render.Allowed(domains, req.URL.Host) {
			return fmt.Errorf("redirect to %s, which is not under render.domains", req.URL.Host)
		}
		return nil
	}
	return c
}

var gzipMagic = []byte{0x1f, 0x8b}

// ctxReader stops reading once ctx is done, so that a run's spooling ends with the run.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

var errTooLarge = errors.New("too large")

// boundedReader fails with errTooLarge once more than n bytes were read.
type boundedReader struct {
	r io.Reader
	n int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.n+1 {
		p = p[:b.n+1]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if b.n < 0 {
		return n, errTooLarge
	}
	return n, err
}

// spool copies a sitemap file, decompressing it if it starts with the gzip magic, to a temporary
// file, refusing one that exceeds sitemap.max_decompressed (after decompression): a gzip bomb is
// refused after that many bytes, not expanded.
func (in *ingest) spool(src io.Reader) (*os.File, error) {
	br := bufio.NewReaderSize(src, 32<<10)
	var r io.Reader = br
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == gzipMagic[0] && head[1] == gzipMagic[1] {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %v", err)
		}
		r = zr
	}
	f, err := os.CreateTemp("", "freshq-sitemap-*")
	if err != nil {
		return nil, err
	}
	limit := int64(in.cfg.Sitemap.MaxDecompressed)
	if _, err := io.Copy(f, &boundedReader{r: ctxReader{in.ctx, r}, n: limit}); err != nil {
		discard(f)
		if errors.Is(err, errTooLarge) {
			return nil, fmt.Errorf("over sitemap.max_decompressed (%d bytes) once decompressed: refused", limit)
		}
		return nil, fmt.Errorf("reading: %v", err)
	}
	return f, nil
}

// fetchFile downloads the sitemap at u and ingests it; level counts the index files above it
// plus one.
func (in *ingest) fetchFile(u string, level int) error {
	in.files++
	if in.files > maxSitemapFiles {
		return fmt.Errorf("the run already read %d files", maxSitemapFiles)
	}
	ctx, cancel := context.WithTimeout(in.ctx, in.cfg.Render.Timeout.D())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", in.cfg.Render.UserAgent)
	resp, err := in.client.Do(req)
	if err != nil {
		return fmt.Errorf("fetching: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching: HTTP %d", resp.StatusCode)
	}
	f, err := in.spool(resp.Body)
	if err != nil {
		return err
	}
	defer discard(f)
	resp.Body.Close()
	cancel()
	return in.file(f, level)
}

// file ingests one spooled sitemap: a first pass checks it parses to the end, so nothing of a
// malformed file lands; the second upserts its URLs, or follows an index's children.
func (in *ingest) file(f *os.File, level int) error {
	in.run.mu.Lock()
	in.run.rep.Files++
	in.run.mu.Unlock()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	kind, err := ParseSitemap(bufio.NewReaderSize(f, 64<<10), func(SitemapEntry) error { return nil })
	if err != nil {
		return fmt.Errorf("sitemap: %v (nothing of this file was stored)", err)
	}
	if kind == SitemapIndex && level > in.cfg.Sitemap.MaxDepth {
		return fmt.Errorf("an index file nested deeper than sitemap.max_depth (%d levels of index files)", in.cfg.Sitemap.MaxDepth)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if kind == SitemapIndex {
		_, err = ParseSitemap(bufio.NewReaderSize(f, 64<<10), func(e SitemapEntry) error {
			if err := in.ctx.Err(); err != nil {
				return err
			}
			in.child(e, level)
			return nil
		})
		return err
	}
	b := in.newBatch()
	if _, err = ParseSitemap(bufio.NewReaderSize(f, 64<<10), b.entry); err != nil {
		return err
	}
	return b.flush()
}

// child follows one <sitemap> of an index; its failure is one failure of the run.
func (in *ingest) child(e SitemapEntry, level int) {
	if e.TooLong {
		in.fail(e.Loc, "child sitemap <loc> too long")
		return
	}
	u, err := cachekey.NormalizeURL(e.Loc)
	if err != nil {
		in.fail(e.Loc, "child sitemap: "+err.Error())
		return
	}
	pu, _ := url.Parse(u)
	if !render.Allowed(in.cfg.Render.Domains, pu.Host) {
		in.run.mu.Lock()
		in.run.rep.Filtered.Add(u)
		in.run.mu.Unlock()
		return
	}
	if in.visited[u] {
		return
	}
	in.visited[u] = true
	if err := in.fetchFile(u, level+1); err != nil {
		in.fail(u, "child sitemap: "+err.Error())
	}
}

func (in *ingest) fail(u, reason string) {
	in.run.mu.Lock()
	in.run.rep.Failed.Add(u, reason)
	in.run.mu.Unlock()
}

// batch gathers a file's valid URLs into chunks for Targets.upsert.
type batch struct {
	in    *ingest
	chunk []parsedItem
	keys  map[string]bool // keys of chunk: a repeated URL flushes first, so a chunk has no duplicate
}

func (in *ingest) newBatch() *batch {
	return &batch{in: in, chunk: make([]parsedItem, 0, targetsChunk), keys: make(map[string]bool, targetsChunk)}
}

func (b *batch) entry(e SitemapEntry) error {
	in := b.in
	if err := in.ctx.Err(); err != nil {
		return err
	}
	if e.TooLong {
		in.fail(e.Loc, fmt.Sprintf("a tag longer than %d bytes", MaxSitemapField))
		in.count(1)
		return nil
	}
	if e.Loc == "" {
		in.fail("", "<url> without <loc>")
		in.count(1)
		return nil
	}
	item := wire.TargetItem{URL: e.Loc, Device: in.device, Source: "sitemap"}
	if ms, ok := ChangefreqCadence(e.ChangeFreq, in.cfg.Sitemap.MinTTL.D()); ok {
		item.Interval = json.RawMessage(`"` + ms.String() + `"`)
	}
	p, _, err := parseItem(&item, in.devs)
	if err != nil {
		in.fail(e.Loc, err.Error())
		in.count(1)
		return nil
	}
	pu, _ := url.Parse(p.url)
	if !render.Allowed(in.cfg.Render.Domains, pu.Host) {
		in.run.mu.Lock()
		in.run.rep.Filtered.Add(p.url)
		in.run.rep.URLs++
		in.run.mu.Unlock()
		return nil
	}
	if b.keys[string(p.key)] {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.keys[string(p.key)] = true
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

// flush upserts the chunk. Whether a key existed is read just before: a concurrent POST
// /v1/targets of the same URL may make an "added" really an "updated", never lose either.
func (b *batch) flush() error {
	if len(b.chunk) == 0 {
		return nil
	}
	in := b.in
	existed := make([]bool, len(b.chunk))
	for i := range b.chunk {
		b.chunk[i].index = i
		_, err := in.s.Targets.Store.GetSchedule(b.chunk[i].key)
		existed[i] = err == nil
	}
	failed := make(map[int]string)
	if err := in.s.upsert(in.ctx, b.chunk, func(i int, _, msg string) { failed[i] = msg }); err != nil {
		return err
	}
	in.run.mu.Lock()
	for i := range b.chunk {
		p := &b.chunk[i]
		switch msg, bad := failed[i]; {
		case bad:
			in.run.rep.Failed.Add(p.url, msg)
		case existed[i]:
			in.run.rep.Updated.Add(p.url)
		default:
			in.run.rep.Added.Add(p.url)
		}
	}
	in.run.rep.URLs += len(b.chunk)
	in.run.mu.Unlock()
	b.chunk = b.chunk[:0]
	clear(b.keys)
	return nil
}

// upsert writes a run's chunk unless the runs are stopping: under the gate's read side, so
// that Close, once it holds the gate, knows no run writes again. It never waits for the gate:
// a run that meets Close there stops instead of blocking Close's wait for it.
func (s *Sitemaps) upsert(ctx context.Context, chunk []parsedItem, reject func(i int, field, msg string)) error {
	if !s.gate.TryRLock() { // only Close takes the write side: the runs are stopping
		return ErrSitemapsClosed
	}
	defer s.gate.RUnlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrSitemapsClosed, err)
	}
	if _, err := s.Targets.upsert(chunk, reject); err != nil {
		return err // a *storeError, which names the store
	}
	return nil
}

// ChangefreqCadence maps a sitemaps.org <changefreq> to a cadence, floored at minTTL. An absent
// or unknown value reports false: the target keeps its cadence, or resolves one from the routes.
func ChangefreqCadence(freq string, minTTL time.Duration) (time.Duration, bool) {
	const day = 24 * time.Hour
	var d time.Duration
	switch strings.ToLower(strings.TrimSpace(freq)) {
	case "always", "hourly":
		d = time.Hour
	case "daily":
		d = day
	case "weekly":
		d = 7 * day
	case "monthly":
		d = 30 * day
	case "yearly", "never":
		d = 365 * day
	default:
		return 0, false
	}
	d = max(d, minTTL)
	return min(max(d, policy.MinCadence), policy.MaxCadence), true
}

// SitemapKind is the root element of a sitemap file.
type SitemapKind int

// Sitemap file kinds.
const (
	SitemapURLSet SitemapKind = iota + 1 // <urlset>: pages
	SitemapIndex                         // <sitemapindex>: other sitemap files
)

// SitemapEntry is one <url> of a urlset or one <sitemap> of an index. Each field is the trimmed
// text of its tag, at most MaxSitemapField bytes.
type SitemapEntry struct {
	Loc        string
	LastMod    string // parsed and ignored (see the package comment)
	ChangeFreq string
	Priority   string // parsed and ignored
	TooLong    bool   // a tag's text was longer than MaxSitemapField and was cut
}

// ParseSitemap streams a sitemap file token by token, calling fn for each entry in document
// order, and returns the file's kind. Memory is bounded by the longest tag, not the document.
// It fails on XML that is malformed or truncated, on a root other than <urlset> or
// <sitemapindex>, and on anything but comments after the root; fn may have been called for
// entries before the error. Elements it does not know (extensions such as image:image,
// news:news, xhtml:link) are skipped.
func ParseSitemap(r io.Reader, fn func(SitemapEntry) error) (SitemapKind, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 32<<10)
	}
	budget := &tokenBudget{r: br}
	dec := xml.NewDecoder(budget)
	p := &sitemapParser{dec: dec, budget: budget}
	dec.CharsetReader = func(charset string, input io.Reader) (io.Reader, error) {
		switch strings.ToLower(charset) {
		case "utf-8", "utf8", "us-ascii", "ascii":
			return input, nil
		}
		return nil, fmt.Errorf("encoding %q is not supported (sitemaps are UTF-8)", charset)
	}
	var (
		kind     SitemapKind
		rootNS   string
		rootDone bool
		entry    = "url"
	)
	for {
		tok, err := p.token()
		if err == io.EOF {
			if kind == 0 {
				return 0, errors.New("no <urlset> or <sitemapindex> element")
			}
			if !rootDone {
				return kind, errors.New("truncated: the document ends inside its root element")
			}
			return kind, nil
		}
		if err != nil {
			return kind, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if rootDone {
				return kind, fmt.Errorf("line %d: element <%s> after the root element", line(dec), t.Name.Local)
			}
			if kind == 0 {
				switch t.Name.Local {
				case "urlset":
					kind = SitemapURLSet
				case "sitemapindex":
					kind, entry = SitemapIndex, "sitemap"
				default:
					return 0, fmt.Errorf("root element <%s> is neither <urlset> nor <sitemapindex>", t.Name.Local)
				}
				rootNS = t.Name.Space
				continue
			}
			if t.Name.Local != entry || t.Name.Space != rootNS {
				if err := p.skip(); err != nil {
					return kind, err
				}
				continue
			}
			e, err := parseEntry(p, rootNS)
			if err != nil {
				return kind, err
			}
			if err := fn(e); err != nil {
				return kind, err
			}
		case xml.EndElement:
			rootDone = true // the decoder checks that end tags match: this closes the root
		case xml.CharData:
			if kind == 0 || rootDone {
				if len(strings.TrimSpace(string(t))) > 0 {
					return kind, fmt.Errorf("line %d: text outside the root element", line(dec))
				}
			}
		}
	}
}

func line(dec *xml.Decoder) int {
	l, _ := dec.InputPos()
	return l
}

// parseEntry reads the children of one <url> or <sitemap> up to its end tag.
func parseEntry(p *sitemapParser, ns string) (SitemapEntry, error) {
	var e SitemapEntry
	for {
		tok, err := p.token()
		if err != nil {
			return e, unexpectedEOF(err)
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return e, nil
		case xml.StartElement:
			var dst *string
			if t.Name.Space == ns {
				switch t.Name.Local {
				case "loc":
					dst = &e.Loc
				case "lastmod":
					dst = &e.LastMod
				case "changefreq":
					dst = &e.ChangeFreq
				case "priority":
					dst = &e.Priority
				}
			}
			if dst == nil {
				if err := p.skip(); err != nil {
					return e, unexpectedEOF(err)
				}
				continue
			}
			text, long, err := fieldText(p)
			if err != nil {
				return e, err
			}
			*dst = text
			e.TooLong = e.TooLong || long
		}
	}
}

// fieldText reads the text of a simple element up to its end tag, keeping at most
// MaxSitemapField bytes; nested elements are skipped.
func fieldText(p *sitemapParser) (string, bool, error) {
	var sb strings.Builder
	long := false
	for {
		tok, err := p.token()
		if err != nil {
			return "", false, unexpectedEOF(err)
		}
		switch t := tok.(type) {
		case xml.CharData:
			if room := MaxSitemapField - sb.Len(); len(t) > room {
				t, long = t[:room], true
			}
			sb.Write(t)
		case xml.StartElement:
			if err := p.skip(); err != nil {
				return "", false, unexpectedEOF(err)
			}
		case xml.EndElement:
			return strings.TrimSpace(sb.String()), long, nil
		}
	}
}

// sitemapParser reads tokens under a per-token byte budget (MaxSitemapToken): the decoder
// reads through tokenBudget one byte at a time, and the budget is renewed before each token,
// so a token that would grow past it fails while the decoder holds at most the budget.
type sitemapParser struct {
	dec    *xml.Decoder
	budget *tokenBudget
}

func (p *sitemapParser) token() (xml.Token, error) {
	p.budget.left = MaxSitemapToken
	tok, err := p.dec.Token()
	if errors.Is(err, errTokenTooLong) {
		return nil, fmt.Errorf("line %d: a text node, tag or comment longer than %d bytes: refused", line(p.dec), MaxSitemapToken)
	}
	return tok, err
}

// skip skips the element just started, token by token (xml.Decoder.Skip would read the whole
// element under one budget).
func (p *sitemapParser) skip() error {
	for depth := 1; depth > 0; {
		tok, err := p.token()
		if err != nil {
			return err
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		}
	}
	return nil
}

var errTokenTooLong = errors.New("token over budget")

// tokenBudget is the decoder's reader: an io.ByteReader (so the decoder adds no buffer of its
// own) that fails once left bytes were read since the budget was last renewed.
type tokenBudget struct {
	r    *bufio.Reader
	left int
}

func (t *tokenBudget) ReadByte() (byte, error) {
	if t.left <= 0 {
		return 0, errTokenTooLong
	}
	t.left--
	return t.r.ReadByte()
}

func (t *tokenBudget) Read(p []byte) (int, error) {
	if t.left <= 0 {
		return 0, errTokenTooLong
	}
	n, err := t.r.Read(p[:min(len(p), t.left)])
	t.left -= n
	return n, err
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return errors.New("truncated: the document ends inside an element")
	}
	return err
}
