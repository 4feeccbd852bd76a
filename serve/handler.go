package serve

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/rs/zerolog"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/crawlers"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/connguard"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/wire"
)

// Headers of the protocol.
const (
	HeaderToken  = "X-Prerender-Token" // the middleware's token, checked against serve.tokens
	HeaderDevice = "X-Freshq-Device"   // an explicit device, instead of the User-Agent's
	HeaderCache  = "X-Freshq-Cache"    // hit | stale | miss: what the request got
	HeaderStale  = "X-Freshq-Stale"    // true when the page is past its cadence
)

// rushQueue bounds the expired pages' rows waiting to be moved up; past it a rush is dropped
// (counted): the row is due already and the sweep finds it anyway, only later.
const rushQueue = 256

// gzipMin is the smallest body worth compressing.
const gzipMin = 1024

// Settings is what the crawler listener reads of the configuration: serve.tokens, serve.wait
// and the table of User-Agent patterns (families and devices), with the services' settings (devices, key rules,
// render.domains, serve.miss_rate) of the same configuration, so that one read per request
// gives values that agree. It is narrowed where the node is assembled (assemble/settings).
type Settings struct {
	Keying intake.Keying    // the devices and key rules of the policy in force (intake.KeyingOf)
	Misses *misses.Settings // render on miss's: render.domains, its sites, serve.miss_rate and serve.miss_burst
	Tokens []string         // serve.tokens: empty serves loopback clients only
	Wait   time.Duration    // serve.wait: how long a miss waits for its render
	// ClientIPHeader is serve.client_ip_header ("": the peer is the client), believed from
	// TrustedProxies only (crawlers.ClientIP).
	ClientIPHeader string
	TrustedProxies []netip.Prefix
	// Crawlers is the table of User-Agent patterns in force (serve.crawlers, else the shipped
	// families; serve.mobile_agents, else the shipped device patterns): which family a
	// User-Agent claims and which device it renders as. Nil: none is classified, every
	// request is desktop unless X-Freshq-Device says.
	Crawlers *crawlers.Table
	// Verify is serve.verify_crawlers: a claimed crawler that documents a verification and
	// fails it gets no render on miss (HandlerDeps.Verifier asks).
	Verify bool
	// VerifyRetryAfter is the Retry-After, in seconds, of a page not rendered for an
	// unverified crawler: serve.verify.cache_ttl, when its verdict is asked again.
	VerifyRetryAfter int
}

// HandlerDeps are what a Handler needs. Every one is required but Log, AdminToken and Rushed:
//   - Targets reads pages and moves expired rows up, Misses renders on miss;
//   - Settings and Now are worker 0's, read once per request;
//   - Metrics counts every answer (freshq_serve_*): a listener that counts nothing looks idle;
//   - Demand counts the requests per stored key, half of what the freshness policy schedules
//     by: a listener without it would silently starve the requests counters.
type HandlerDeps struct {
	Targets  *intake.Targets
	Misses   *misses.Flights
	Settings func() *Settings
	Now      func() int64
	Log      zerolog.Logger
	Metrics  *Metrics
	Demand   *Demand
	// AdminToken is the admin listener's token in force (FRESHQ_TOKEN included), refused here
	// so that it is never sent where crawlers' middlewares are configured; asked at each request,
	// so a reload that changes it is refused from then on. Nil, or "": there is none.
	AdminToken func() string
	// Verifier verifies claimed crawlers' addresses (package crawlers), when Settings.Verify
	// says so; nil verifies none (every claimed crawler is unchecked, as verification off).
	Verifier *crawlers.Verifier
	// Tally, if set, counts what each crawler family got, for /v1/queue's freshness view.
	Tally *crawlers.Tally
	// Pages, if set, counts the same answers per page (its key) and family, in a bounded
	// table, for the console's page view (GET /v1/targets/crawlers).
	Pages *crawlers.PageTally
	// Rushed, if set, is told of every expired page's row the mover handled, after the fact
	// (a test waits on it instead of on time).
	Rushed func(key []byte, rushed bool, err error)
}

// ErrMissingDependency is returned by NewHandler left without a required dependency.
var ErrMissingDependency = errors.New("serve: a required dependency is missing")

// NewHandler returns the crawler listener's handler over d, or ErrMissingDependency naming the
// first required field left nil. Start runs the goroutine that moves expired pages' rows up;
// Stop ends it.
func NewHandler(d HandlerDeps) (*Handler, error) {
	for _, dep := range []struct {
		name string
		nil  bool
	}{
		{"Targets", d.Targets == nil}, {"Misses", d.Misses == nil}, {"Settings", d.Settings == nil},
		{"Now", d.Now == nil}, {"Metrics", d.Metrics == nil}, {"Demand", d.Demand == nil},
	} {
		if dep.nil {
			return nil, fmt.Errorf("%w: Handler needs %s", ErrMissingDependency, dep.name)
		}
	}
	h := &Handler{d: d}
	h.init()
	return h, nil
}

// Demand is the handler's count of requests per key, which worker 0 flushes to the targets.
func (h *Handler) Demand() *Demand { return h.d.Demand }

// Handler serves the crawler listener; NewHandler builds it.
type Handler struct {
	d HandlerDeps

	rushes  misses.HostRate // expired pages' rows moved up, per site (misses.Settings.SiteOf)
	queue   chan []byte
	pending sync.Map // keys queued or being rushed: one rush at a time per key
	once    sync.Once
	done    chan struct{}
}

func (h *Handler) init() {
	h.once.Do(func() {
		h.queue = make(chan []byte, rushQueue)
		h.done = make(chan struct{})
	})
}

// Start moves the rows of expired pages up, one at a time, until ctx ends or Stop.
func (h *Handler) Start(ctx context.Context) {
	h.init()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.done:
				return
			case key := <-h.queue:
				rushed, err := h.d.Targets.RushStale(key)
				h.pending.Delete(string(key))
				switch {
				case err != nil:
					h.d.Metrics.rush("failed")
					h.d.Log.Warn().Err(err).Str("key", string(key)).Msg("moving an expired page's row up")
				case rushed:
					h.d.Metrics.rush("rushed")
				default:
					h.d.Metrics.rush("already")
				}
				if h.d.Rushed != nil {
					h.d.Rushed(key, rushed, err)
				}
			}
		}
	}()
}

// Stop ends Start's goroutine. Safe twice.
func (h *Handler) Stop() {
	h.init()
	select {
	case <-h.done:
	default:
		close(h.done)
	}
}

// answer is what a request ended with, for the metrics.
type answer struct {
	result string
	code   int
}

// claim is who a request says it is for: the crawler family its User-Agent claims (nil: none)
// and what verification said of it.
type claim struct {
	family  *crawlers.Family
	verdict string
	refused bool   // a page not stored, not rendered: the claim was not verified
	key     []byte // the page's key, once the request named a valid one
}

// ServeHTTP answers one crawler request: GET or HEAD of /{url}, /render/{url} or
// /render?url=. In order: the method, the token (without serve.tokens: the Host and a
// browser's headers, fromABrowser), the URL, the device, the key, the host; then the stored
// page (hit or stale) or a render on miss.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.init()
	start := time.Now()
	cfg := h.d.Settings()
	c := claim{family: cfg.Crawlers.Match(r.UserAgent()), verdict: crawlers.NotACrawler}
	if c.family != nil {
		c.verdict = crawlers.Unchecked // until verified, after the refusals
	}
	a := h.serve(w, r, cfg, &c)
	family := crawlers.Name(c.family)
	h.d.Metrics.observe(a.result, a.code, family, c.verdict, time.Since(start).Seconds())
	if c.family != nil {
		got := ""
		switch {
		case c.refused:
			got = crawlers.GotRefused
		case a.result == ResultHit && a.code < 500:
			got = crawlers.GotHit
		case a.result == ResultStale:
			got = crawlers.GotStale
		case a.result == ResultMiss && a.code < 500 && a.code != 499:
			got = crawlers.GotMiss
		}
		if got != "" {
			h.d.Tally.Note(family, c.verdict, got)
			h.d.Pages.Note(c.key, family, got, h.d.Now())
		}
	}
}

// verify is the verdict on the request's claim to be a crawler of c.family, when
// verification is on: asked of the verifier and waited for (within serve.verify.timeout) when
// wait, for the one answer that depends on it (a render on miss, or a 503 without one); else
// what is known now (crawlers.Verifier.Known: the cached verdict, or pending and its lookup
// started in the background), for an answer that is the same whatever the verdict.
func (h *Handler) verify(r *http.Request, cfg *Settings, c *claim, wait bool) {
	if c.family == nil || !cfg.Verify || h.d.Verifier == nil {
		return
	}
	var values []string
	if cfg.ClientIPHeader != "" {
		values = r.Header.Values(cfg.ClientIPHeader)
	}
	addr, _ := crawlers.ClientIP(r.RemoteAddr, values, cfg.TrustedProxies)
	if wait {
		c.verdict = h.d.Verifier.Verify(r.Context(), c.family, addr)
	} else {
		c.verdict = h.d.Verifier.Known(c.family, addr)
	}
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, cfg *Settings, c *claim) answer {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return refuse(w, http.StatusMethodNotAllowed, "", "the crawler listener serves pages only: GET or HEAD /{absolute URL}")
	}
	if code, msg := h.authorize(r, cfg); code != 0 {
		connguard.Refused(w) // a client without the token holds no slot in keep-alive
		return refuse(w, code, HeaderToken, msg)
	}
	if len(cfg.Tokens) == 0 { // only the loopback peer authorized it: it may be a browser's
		if code, field, msg := fromABrowser(r); code != 0 {
			return refuse(w, code, field, msg)
		}
	}
	connguard.Authenticated(r.Context())
	target, err := TargetURL(r.RequestURI)
	if err != nil {
		return refuse(w, http.StatusBadRequest, "url", err.Error())
	}
	device, field, err := deviceOf(r, cfg.Crawlers, c.family, cfg.Keying.Devices)
	if err != nil {
		return refuse(w, http.StatusBadRequest, field, err.Error())
	}
	key, err := intake.Key(target, device, cfg.Keying)
	if err != nil {
		return refuse(w, http.StatusBadRequest, fieldOf(err, "url"), err.Error())
	}
	c.key = key
	host := string(cachekey.Host(key))
	domains := cfg.Misses.Domains
	if len(domains) > 0 && !render.Allowed(domains, host) {
		return unnamedHost(w, "host "+host+" is not one render.domains allows")
	}
	pg, err := h.d.Targets.Stored(key)
	now := h.d.Now() // a stored page's request is counted as of its lookup: see Demand
	switch {
	case err == nil && (!pg.Expired || pg.ServeStale):
		if pg.Expired && !pg.Urgent {
			h.moveUp(key, cfg)
		}
		h.verify(r, cfg, c, false) // a stored page is served to anyone: never waits for a lookup
		h.noteDemand(cfg, c, key, now)
		result := ResultHit
		if pg.Stale {
			result = ResultStale
		}
		return answer{result, writePage(w, r, pg.ServedPage, result)}
	case err == nil: // stored, expired, not served stale: rendered on miss, counted whatever comes of it
		a := h.miss(w, r, key, target, device, host, cfg, true, c)
		h.noteDemand(cfg, c, key, now)
		return a
	case errors.Is(err, intake.ErrNotFound):
		return h.miss(w, r, key, target, device, host, cfg, false, c)
	default:
		h.verify(r, cfg, c, false)
		return h.fail(w, ResultError, err)
	}
}

// miss renders key on miss and serves the page, within serve.wait. Only for a host
// render.domains names (an empty list renders nothing on miss here), and a new target only
// within its host's serve.miss_rate (both checked again by misses.Flights, the one place that
// creates targets on miss, for every listener). stored: the page was stored at the lookup (an
// expired page's), its request counted by the caller; else it is counted once the render stored
// the page, when its claim deserves it (countsDemand). A target whose last render ended with a client error
// (a page that declares 404) is answered that status without rendering again within its cadence.
func (h *Handler) miss(w http.ResponseWriter, r *http.Request, key []byte, target, device, host string, cfg *Settings, stored bool, c *claim) answer {
	if len(cfg.Misses.Domains) == 0 {
		h.verify(r, cfg, c, false)
		return unnamedHost(w, "no page stored, and render on miss needs render.domains to name the host ("+host+")")
	}
	known, lastStatus, lastAt, err := h.d.Targets.Known(key)
	if err != nil {
		h.verify(r, cfg, c, false)
		return h.fail(w, ResultMiss, err)
	}
	now := h.d.Now()
	if known && lastStatus >= 400 && lastStatus <= 499 && now-lastAt <= h.d.Targets.CadenceOf(key) {
		h.verify(r, cfg, c, false)
		return h.declared(w, lastStatus, ResultHit)
	}
	// The one answer that depends on the verdict: a render, or a 503 without one.
	h.verify(r, cfg, c, true)
	if c.verdict == crawlers.Unverified {
		c.refused = true
		return unverified(w, crawlers.Name(c.family), cfg.VerifyRetryAfter)
	}
	pg, err := h.d.Misses.Wait(r.Context(), key, target, device, cfg.Wait)
	if err != nil && r.Context().Err() != nil {
		return answer{ResultMiss, 499} // the client is gone: nobody reads an answer
	}
	if errors.Is(err, intake.ErrRenderFailed) {
		if _, st, _, kerr := h.d.Targets.Known(key); kerr == nil && st >= 400 && st <= 499 {
			return h.declared(w, st, ResultMiss) // this request's render said so
		}
	}
	if err != nil {
		return h.fail(w, ResultMiss, err)
	}
	if !stored { // stored now, by the render
		h.noteDemand(cfg, c, key, now)
	}
	return answer{ResultMiss, writePage(w, r, pg, ResultMiss)}
}

// countsDemand reports whether a request with claim c counts toward its page's demand, which
// orders the scarce renders (the freshness policy's request rate). With verification off
// (serve.verify_crawlers, or no Verifier) the operator trusts its middleware: every request
// counts. With it on, the crawler listener may be reached by anyone who writes a crawler's
// User-Agent, so only a claim verified by now counts: not one unverified, nor one pending (the
// address's first request, its lookup running in the background: one request an address a
// serve.verify.cache_ttl goes uncounted, which keeping it until the lookup ends would not be
// worth a per-address list of pages), nor one of a family that documents no verification
// (unverifiable), nor a request without an address to verify (unchecked), nor one that claims
// no crawler: otherwise a spoofer would only have to change or drop its User-Agent. The verdict
// is the one the request was answered with, cached per address by the Verifier: no lookup here.
func (h *Handler) countsDemand(cfg *Settings, c *claim) bool {
	if !cfg.Verify || h.d.Verifier == nil {
		return true
	}
	return c.verdict == crawlers.Verified
}

// noteDemand counts the request of key at now toward its page's demand when its claim deserves
// it (countsDemand).
func (h *Handler) noteDemand(cfg *Settings, c *claim, key []byte, now int64) {
	if h.countsDemand(cfg, c) {
		h.d.Demand.Note(key, now)
	}
}

// declared answers a page whose render ended with a client error (404, 410) with that status,
// when no page of it is stored (its render carried none: a site's own 404 page is stored and
// served as any page is). result is what the request got: a miss when its own render said so.
func (h *Handler) declared(w http.ResponseWriter, status int, result string) answer {
	w.Header().Set(HeaderCache, result)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte("<!doctype html><title>" + strconv.Itoa(status) + "</title><h1>" + http.StatusText(status) + "</h1>\n"))
	return answer{result, status}
}

// moveUp queues key's row to be moved up, unless it is queued already, the queue is full or
// its site is over its rate.
func (h *Handler) moveUp(key []byte, cfg *Settings) {
	if _, queued := h.pending.LoadOrStore(string(key), true); queued {
		return
	}
	if ok, _ := h.rushes.Take(cfg.Misses.SiteOf(key), h.d.Now(), cfg.Misses.Rate, cfg.Misses.Burst); !ok {
		h.pending.Delete(string(key))
		h.d.Metrics.rush("over_rate")
		return
	}
	select {
	case h.queue <- bytes.Clone(key):
	default:
		h.pending.Delete(string(key))
		h.d.Metrics.rush("queue_full")
	}
}

// authorize checks X-Prerender-Token against serve.tokens: 0 when it passes, else the status and
// why. With no tokens configured (a loopback listener: the configuration requires tokens beyond
// it) only a loopback peer passes.
func (h *Handler) authorize(r *http.Request, cfg *Settings) (int, string) {
	got := r.Header.Get(HeaderToken)
	if len(cfg.Tokens) == 0 {
		if !loopbackPeer(r.RemoteAddr) {
			return http.StatusUnauthorized, "serve.tokens is empty: only loopback clients are served"
		}
		return 0, ""
	}
	if got == "" {
		return http.StatusUnauthorized, "missing X-Prerender-Token (one of serve.tokens)"
	}
	if admin := h.adminToken(); admin != "" && subtle.ConstantTimeCompare([]byte(got), []byte(admin)) == 1 {
		return http.StatusForbidden, "the admin token is not accepted on the crawler listener; use one of serve.tokens"
	}
	for _, tok := range cfg.Tokens {
		if subtle.ConstantTimeCompare([]byte(got), []byte(tok)) == 1 {
			return 0, ""
		}
	}
	return http.StatusForbidden, "wrong X-Prerender-Token"
}

// adminToken is the admin listener's token in force, "" when there is none.
func (h *Handler) adminToken() string {
	if h.d.AdminToken == nil {
		return ""
	}
	return h.d.AdminToken()
}

func loopbackPeer(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// deviceOf is the request's device: X-Freshq-Device when given (a device the configuration
// knows), else the one the table says the User-Agent renders as (its family's, else the first
// device pattern it carries: crawlers.Table.Device) when the configuration knows it, else
// desktop. On a refusal it names the header.
func deviceOf(r *http.Request, table *crawlers.Table, family *crawlers.Family, names map[string]bool) (device, field string, err error) {
	if d := r.Header.Get(HeaderDevice); d != "" {
		if !names[d] {
			return "", HeaderDevice, errors.New("unknown device " + strconv.Quote(d))
		}
		return d, "", nil
	}
	if d := table.Device(family, r.UserAgent()); d != "" && names[d] {
		return d, "", nil
	}
	return cachekey.DefaultDevice, "", nil
}

// fieldOf is the field an intake error names, or def.
func fieldOf(err error, def string) string {
	var fe *intake.FieldError
	if errors.As(err, &fe) && fe.Field != "" {
		return fe.Field
	}
	return def
}

// fail answers an error of a page read or a render on miss.
func (h *Handler) fail(w http.ResponseWriter, result string, err error) answer {
	retryAfter, says := intake.RetryAfter(err)
	switch {
	case errors.Is(err, intake.ErrHostNotAllowed):
		return unnamedHost(w, err.Error())
	case errors.Is(err, intake.ErrNotFound):
		return answer{result, writeError(w, http.StatusNotFound, fieldOf(err, "url"), err.Error())}
	case says:
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		return answer{result, writeError(w, http.StatusServiceUnavailable, "url", err.Error())}
	case errors.Is(err, intake.ErrOverloaded), errors.Is(err, intake.ErrStopping),
		errors.Is(err, intake.ErrWaitTimeout), errors.Is(err, intake.ErrStore):
		// A crawler takes a 503 with Retry-After as "come back", and keeps the page it has.
		w.Header().Set("Retry-After", "5")
		return answer{result, writeError(w, http.StatusServiceUnavailable, "", err.Error())}
	case errors.Is(err, intake.ErrRenderFailed), errors.Is(err, intake.ErrBadStoredPage):
		return answer{result, writeError(w, http.StatusBadGateway, "", err.Error())}
	}
	var fe *intake.FieldError
	if errors.As(err, &fe) {
		return answer{result, writeError(w, http.StatusBadRequest, fe.Field, err.Error())}
	}
	h.d.Log.Error().Err(err).Msg("serving a page")
	return answer{result, writeError(w, http.StatusInternalServerError, "", err.Error())}
}

// unnamedHostRetryAfter is the Retry-After of a page refused because render.domains does not
// name its host: a configuration to fix (or a stranger's made-up host), not a load that passes
// in seconds.
const unnamedHostRetryAfter = "3600"

// unnamedHost refuses a page of a host freshq does not render: 503 with a long Retry-After,
// never a 404. The middlewares relay freshq's status to the crawler as it is (prerender-node
// writes it unchanged; the nginx recipe proxies it), and a 404 tells a search engine that a
// real page of the site does not exist, which drops it from the index; a 503 says "come back",
// and the crawler keeps what it has. Nothing is filed and nothing fetched.
func unnamedHost(w http.ResponseWriter, msg string) answer {
	w.Header().Set("Retry-After", unnamedHostRetryAfter)
	return refuse(w, http.StatusServiceUnavailable, "url", msg)
}

// unverified answers a request for a page not stored whose User-Agent claims a crawler its
// address is not shown to be: no render, and the answer a miss freshq will not render gets
// (unnamedHost): 503 with Retry-After (when the verdict is asked again), which a middleware
// relays as "come back" and never as "this page does not exist", and which the nginx recipe
// and a worker may turn into the site's own page. Nothing is filed and nothing fetched: a
// User-Agent anyone can write costs the site's origin nothing.
func unverified(w http.ResponseWriter, family string, retryAfter int) answer {
	w.Header().Set("Retry-After", strconv.Itoa(max(retryAfter, 1)))
	return answer{ResultMiss, writeError(w, http.StatusServiceUnavailable, "User-Agent",
		"no page stored, and a render on miss is for verified crawlers only: this request claims a "+family+
			" crawler, and its address is not one the family's verification confirms (docs/SECURITY.md, Crawlers verified)")}
}

func refuse(w http.ResponseWriter, code int, field, msg string) answer {
	return answer{ResultError, writeError(w, code, field, msg)}
}

func writeError(w http.ResponseWriter, code int, field, msg string) int {
	wire.WriteError(w, code, field, msg)
	return code
}

// dropped are the stored headers a page is not served with: the body is served as stored
// (compressed here or not at all), and its validators are freshq's own.
var dropped = map[string]bool{"content-length": true, "content-encoding": true, "transfer-encoding": true,
	"connection": true, "etag": true, "last-modified": true, "age": true, "cache-control": true, "vary": true}

// crawlerCacheControl and crawlerVary are what every page answer carries in place of the
// origin's own: a site's middleware answers a crawler with the prerendered page and a person
// with the site's shell at the same URL, so a shared cache in front of the site (a CDN) must
// neither keep the crawler's page for everyone (private) nor take one for the other (Vary:
// User-Agent, for the caches that key by it). The crawler itself may keep it, and
// revalidates with the ETag and Last-Modified.
var (
	crawlerCacheControl = []string{"private"}
	crawlerVary         = []string{"Accept-Encoding, User-Agent"}
)

// writePage answers the page as the site would serve it: its status, its declared headers
// (Location on a 3xx), Content-Type, and freshq's Age, Last-Modified, ETag (304 when
// If-None-Match holds it), gzip when accepted, and what the request got (X-Freshq-Cache,
// X-Freshq-Stale). No CSP or sandbox: that belongs to the admin listener, where an operator's
// browser opens pages. A page stored gzipped (intake.CompressPage) is written as stored to a
// client that accepts gzip, and streamed through a gzip reader to one that does not: never
// decompressed whole, since a client that does not read would hold the whole decoded page
// for the write timeout. Its Content-Length is the plain length recorded when it was stored
// (none, chunked, for a page stored before that was recorded); a HEAD decompresses nothing.
// It returns the status sent.
func writePage(w http.ResponseWriter, r *http.Request, pg intake.ServedPage, result string) int {
	body := pg.Body
	stored := intake.Gzipped(&pg.Page)
	accepts := acceptsGzip(r.Header.Get("Accept-Encoding"))
	var plain *gzip.Reader // the stored body's decoder, for a client without gzip
	if stored && !accepts {
		// Rare (every prerender middleware accepts gzip). The gzip header is read now, so that
		// a body that is not gzip is refused before any header is sent.
		plain = gunzipPool.Get().(*gzip.Reader)
		defer gunzipPool.Put(plain)
		if err := plain.Reset(bytes.NewReader(pg.Body)); err != nil {
			return writeError(w, http.StatusBadGateway, "", "the stored page's gzipped body does not decompress: "+err.Error())
		}
		stored = false
	}
	hd := w.Header()
	for _, x := range pg.Headers {
		if !dropped[strings.ToLower(x.Name)] {
			hd.Set(x.Name, x.Value)
		}
	}
	if len(hd["Content-Type"]) == 0 {
		hd["Content-Type"] = textHTML
	}
	// freshq's own headers, assigned under their canonical names: Header.Set would
	// canonicalise each name again on every request.
	etag := etagOf(pg.Body)
	served := etag
	if stored || (plain == nil && len(body) >= gzipMin && accepts) {
		served = gzipETag(etag) // the gzip representation: a validator of its own (RFC 9110 8.8.3)
	}
	hd["Etag"] = []string{served}
	hd["Last-Modified"] = []string{time.UnixMilli(pg.RenderedAtMs).UTC().Format(http.TimeFormat)}
	hd["Age"] = []string{strconv.FormatInt(max(pg.AgeMs, 0)/1000, 10)}
	hd[HeaderCache] = []string{result}
	hd[HeaderStale] = []string{strconv.FormatBool(pg.Stale)}
	hd["Vary"] = crawlerVary
	hd["Cache-Control"] = crawlerCacheControl
	status := int(pg.Status)
	if inm := r.Header.Get("If-None-Match"); status == http.StatusOK && (etagMatch(inm, etag) || etagMatch(inm, gzipETag(etag))) {
		// Either representation's validator says the client holds this content.
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	switch {
	case plain != nil:
		if pg.PlainLen > 0 {
			hd["Content-Length"] = []string{strconv.FormatInt(pg.PlainLen, 10)}
		}
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			buf := copyPool.Get().(*[]byte)
			cw := &clientWriter{w: w}
			_, err := io.CopyBuffer(cw, plain, *buf)
			copyPool.Put(buf)
			if err != nil && cw.err == nil {
				// The status is sent: only a cut connection tells the client that the body
				// it got is not the page (a chunked body would otherwise end as if whole).
				panic(http.ErrAbortHandler)
			}
		}
	case stored: // and accepted: as stored
		hd["Content-Encoding"] = gzipEncoding
		hd["Content-Length"] = []string{strconv.Itoa(len(body))}
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			w.Write(body)
		}
	case len(body) >= gzipMin && accepts:
		hd.Set("Content-Encoding", "gzip")
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			gz := gzipPool.Get().(*gzip.Writer)
			gz.Reset(w)
			gz.Write(body)
			gz.Close()
			gzipPool.Put(gz)
		}
	default:
		hd.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			w.Write(body)
		}
	}
	return status
}

// Header values shared by every response: net/http only reads them.
var (
	textHTML     = []string{"text/html; charset=utf-8"}
	gzipEncoding = []string{"gzip"}
)

// gunzipPool and copyPool hold the readers and copy buffers that stream stored pages to
// clients without gzip: a connection costs a reader's window and one buffer, whatever the
// page's size.
var (
	gunzipPool = sync.Pool{New: func() any { return new(gzip.Reader) }}
	copyPool   = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
)

// clientWriter records the error of a write to the client (gone, or past its write deadline),
// to tell it from an error of the stored body read: net/http closes the client's connection
// itself.
type clientWriter struct {
	w   io.Writer
	err error
}

func (c *clientWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.err = err
	}
	return n, err
}

var gzipPool = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return gz
}}

// etagOf is a strong validator of the body as stored.
func etagOf(body []byte) string {
	var b [8]byte
	h := xxhash.Sum64(body)
	for i := range b {
		b[i] = byte(h >> (56 - 8*i))
	}
	return `"` + hex.EncodeToString(b[:]) + `"`
}

// gzipETag is the validator of a page's gzip representation: the plain one's with "-gzip"
// before its closing quote. A strong ETag names one representation, and the gzip and plain
// bodies are two, so they may not share one.
func gzipETag(etag string) string { return etag[:len(etag)-1] + `-gzip"` }

// etagMatch reports whether an If-None-Match value holds etag (or is *); a weak form of it
// matches too, as the weak comparison If-None-Match uses allows.
func etagMatch(header, etag string) bool {
	for v := range strings.SplitSeq(header, ",") {
		v = strings.TrimSpace(v)
		if v == "*" || strings.TrimPrefix(v, "W/") == etag {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding value accepts gzip (not with q=0).
func acceptsGzip(header string) bool {
	for v := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(v), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.TrimSpace(name) != "*" {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}
