package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/freshq/freshq/outcome"
)

// Request is one render.
type Request struct {
	Key    []byte // the cache key (device|url), for logs; renderers do not interpret it
	URL    string
	Device string // e.g. "desktop", "mobile": picks the User-Agent from render.user_agents
	// CacheEpoch is worker 0's cache epoch (shm.CounterCacheEpoch) when the render was taken:
	// an operator's recache or rush raises it, and a renderer that keeps a cache of
	// sub-resources between renders (chrome) clears it once when it sees one above the last it
	// cleared at. Other renderers ignore it.
	CacheEpoch uint64
	// Validators, when set, make the render a conditional one for a ConditionalRenderer: the
	// page's request carries them, and an answer 304 is the result. Other renderers ignore it.
	Validators *Validators
}

// Validators are what the origin sent with the last full render of a page, for a conditional
// request (If-None-Match, If-Modified-Since); either may be empty.
type Validators struct {
	ETag         string
	LastModified string
}

// ConditionalRenderer is a renderer whose render can itself be the conditional check: given
// Request.Validators, it sends them with the page's request and returns a 304 answer as the
// result (outcome.OK, Status 304, no body, the new validators in Headers); any other answer is
// the render, the page fetched once. A renderer that is not one is checked first
// (Checker) and renders after a 200: the document fetched twice, once by the check.
type ConditionalRenderer interface {
	Renderer
	RendersConditionally()
}

// The stages of Result.Stage (package outcome holds the names, which wire shares); the
// package doc says what each covers.
const (
	StagePolicy   = outcome.StagePolicy
	StageDial     = outcome.StageDial
	StageRequest  = outcome.StageRequest
	StageHeaders  = outcome.StageHeaders
	StageBody     = outcome.StageBody
	StageExec     = outcome.StageExec
	StageBrowser  = outcome.StageBrowser
	StageNavigate = outcome.StageNavigate
	StageReady    = outcome.StageReady
)

// Result is what a render produced. Only outcome.Outcome and Stage are always set.
type Result struct {
	Outcome  outcome.Outcome
	Status   int               // the HTTP status when there was one (the last hop's); 0 otherwise
	Stage    string            // where the render ended: one of the Stage constants
	Headers  map[string]string // content-type, content-language, last-modified, etag, cache-control, retry-after, when present (lowercase keys)
	Body     []byte            // the page, for outcome.OK and outcome.Noindex (nil for a noindex page over max_body)
	FinalURL string            // after redirects: the URL of the last response, or of the hop that failed to give one
	Duration time.Duration     // wall time of the render
	Err      string            // the cause, for people; empty for outcome.OK
	Timings  *Timings          // the chrome renderer's phases; nil for the other renderers
	Signals  *Signals          // what a browser saw of the page beyond its document; nil for renderers that run no scripts
}

// Signals are what a render saw of the page besides its document: evidence for the render's
// verdict (package verdict), which judges a render that completed before it is stored. Only a
// renderer that runs the page's scripts can give them; nil from the others.
type Signals struct {
	// Exceptions counts the uncaught exceptions the page's scripts threw.
	Exceptions int
	// FailedRequests counts the page's own data requests (XHR and fetch to the page's site)
	// whose data did not arrive: a network error, or an answer 5xx, 408, 429, 404 or 410. Not
	// 401, 403 or another 4xx, which a site's account endpoints (/api/me, /api/cart) answer a
	// visitor who is not logged in, as a prerender never is; nor a request the renderer
	// refused itself, nor one cancelled.
	FailedRequests int
	// PendingRequests counts the page's own data requests still in flight when the page was
	// captured: a page captured mid-load.
	PendingRequests int
	// Cold is set when the render fetched the page's scripts and styles past the browser's
	// cache (a second look at a render that looked wrong, or an operator's recache).
	Cold bool
	// Evidence is a few lines for people: the first exceptions' messages and failed or
	// pending requests' URLs, at most MaxEvidence of at most MaxEvidenceLen bytes each.
	Evidence []string
}

// Bounds on Signals.Evidence, so that a page throwing in a loop costs a result a few hundred
// bytes, not megabytes.
const (
	MaxEvidence    = 4
	MaxEvidenceLen = 256
)

// EvidenceLine is line cut to at most MaxEvidenceLen bytes, on a rune boundary.
func EvidenceLine(line string) string {
	n := MaxEvidenceLen
	if len(line) <= n {
		return line
	}
	for n > 0 && !utf8.RuneStart(line[n]) {
		n--
	}
	return line[:n]
}

// Timings are the phases of a browser render, each from the render's start.
type Timings struct {
	Response time.Duration // the document's response committed (0 if there was none)
	Load     time.Duration // the load event (0 if it did not fire)
	Ready    time.Duration // the page was ready: prerenderReady, or network idle (0 if never)
	Captured time.Duration // the DOM was serialized (0 if it was not)
	Blocked  int           // requests refused before they loaded (types, patterns, policy)
}

// Renderer renders one page. Implementations are safe for concurrent use, never panic, and
// return within render.timeout (plus the time a kill takes) or as soon as ctx ends, whichever is
// first; a ctx that ends is outcome.Timeout, its Err saying "canceled" when the caller cancelled
// rather than a deadline passing.
type Renderer interface {
	Render(ctx context.Context, req Request) Result
}

// Option adjusts New.
type Option func(*options)

type options struct {
	stream uint64
}

// WithStream gives the sim renderer its own random stream, so that workers sharing a seed do not
// draw the same sequence: pass the worker index. Other renderers ignore it.
func WithStream(stream uint64) Option { return func(o *options) { o.stream = stream } }

// New builds the renderer render.renderer names: http (also when empty), exec or sim. cfg should
// be validated (config.Validate); New still refuses what a renderer cannot run with.
//
// A renderer holds no goroutines. The http one keeps idle connections: after a reload replaces
// it, call its CloseIdleConnections.
func New(cfg Options, opts ...Option) (Renderer, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	switch cfg.Renderer {
	case "http", "":
		return NewHTTP(cfg)
	case "exec":
		return NewExec(cfg)
	case "sim":
		return NewSim(cfg, o.stream)
	case "chrome":
		// render/chrome builds it: it imports this package, so this one cannot import it.
		return nil, errors.New("render: the chrome renderer is built by render/chrome.New")
	default:
		return nil, fmt.Errorf("render: unknown renderer %q (want http, exec, chrome or sim)", cfg.Renderer)
	}
}

// checkCommon validates what every renderer relies on.
func checkCommon(cfg Options) error {
	switch {
	case cfg.Timeout <= 0:
		return errors.New("render: timeout must be positive")
	case cfg.MaxBody <= 0:
		return errors.New("render: max_body must be positive")
	}
	return nil
}

// MarkerHeader and MarkerValue mark every request a render makes for a page's document, as
// prerender servers mark theirs: prerender middlewares pass a request carrying it on to the
// site (no loop back into the cache), and sites leave it out of their analytics.
const (
	MarkerHeader = "X-Prerender"
	MarkerValue  = "1"
)

// userAgent is the User-Agent for a device: render.user_agents[device], else render.user_agent.
func userAgent(cfg *Options, device string) string {
	if ua, ok := cfg.UserAgents[device]; ok && ua != "" {
		return ua
	}
	return cfg.UserAgent
}

// keptHeaders are the response headers a Result carries: what serving the page needs, and
// Retry-After for the retry policy.
var keptHeaders = [...]string{"content-type", "content-language", "last-modified", "etag", "cache-control", "retry-after"}

func keepHeaders(h http.Header) map[string]string {
	var out map[string]string
	for _, k := range keptHeaders {
		vs := h.Values(k)
		if len(vs) == 0 {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(keptHeaders))
		}
		v := vs[0]
		for _, more := range vs[1:] {
			v += ", " + more
		}
		out[k] = v
	}
	return out
}

// errTooLarge reports a body over the limit.
var errTooLarge = errors.New("body over render.max_body")

// readLimited reads r to EOF into a buffer that never grows past limit+1 bytes. It returns
// errTooLarge (with no data) when r holds more than limit bytes. hint, when positive, sizes the
// first allocation (a Content-Length).
func readLimited(r io.Reader, limit, hint int64) ([]byte, error) {
	size := int64(32 << 10)
	if hint > 0 {
		size = hint + 1 // +1 so that a body of exactly hint bytes sees EOF without growing
	}
	size = min(size, limit+1)
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, errTooLarge
			}
			grown := make([]byte, len(buf), min(int64(cap(buf))*2, limit+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// recovered turns a panic inside a renderer into outcome.Failed, keeping the promise that Render
// never panics. Use as: defer recovered(&res, start).
func recovered(res *Result, start time.Time) {
	if p := recover(); p != nil {
		*res = Result{Outcome: outcome.Failed, Stage: res.Stage, Err: fmt.Sprintf("renderer panic: %v", p), Duration: time.Since(start)}
		if res.Stage == "" {
			res.Stage = StageRequest
		}
	}
}

// WithTimeout bounds a render by render.timeout, for a renderer outside this package; TimeoutText
// then says why its context ended.
func WithTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return withTimeout(ctx, timeout)
}

// TimeoutText says why a context from WithTimeout ended, during stage, for Result.Err.
func TimeoutText(ctx context.Context, timeout time.Duration, stage string) string {
	return ctxErr(ctx, timeout, stage)
}

// UserAgent is the User-Agent for a device: render.user_agents[device], else render.user_agent.
func UserAgent(cfg *Options, device string) string { return userAgent(cfg, device) }

// Recovered turns a panic inside a renderer outside this package into outcome.Failed, keeping
// the promise that Render never panics. Use as: defer render.Recovered(&res, start).
func Recovered(res *Result, start time.Time) {
	if p := recover(); p != nil {
		*res = Result{Outcome: outcome.Failed, Stage: cmpOr(res.Stage, StageRequest), Err: fmt.Sprintf("renderer panic: %v", p), Duration: time.Since(start)}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// errRenderTimeout is the cause of a render context that reached render.timeout, telling it
// apart from the caller's own deadline or cancellation.
var errRenderTimeout = errors.New("render.timeout reached")

// withTimeout bounds a render by render.timeout.
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, timeout, errRenderTimeout)
}

// ctxErr says why ctx (from withTimeout) ended, for Result.Err.
func ctxErr(ctx context.Context, timeout time.Duration, stage string) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errRenderTimeout):
		return fmt.Sprintf("render.timeout %s reached during %s", timeout, stage)
	case errors.Is(cause, context.DeadlineExceeded):
		return "caller's deadline passed during " + stage
	default:
		return fmt.Sprintf("canceled during %s: %v", stage, cause)
	}
}
