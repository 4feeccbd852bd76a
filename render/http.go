package render

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/freshq/freshq/outcome"
)

// HTTP is the http renderer: one GET per render, over a transport shared by all its renders.
//
// What it does, in order:
//   - parses the URL (http or https with a host, else outcome.Failed at "request") and checks its
//     host against render.domains (else outcome.Blocked at "policy");
//   - sends GET with the device's User-Agent and an HTML Accept header, under one deadline of
//     render.timeout for the whole exchange: DNS, dial, TLS, headers and every body byte; with
//     Request.Validators, the GET is conditional (If-None-Match, If-Modified-Since, on the
//     page's own request, never a redirect's), and a 304 to it is outcome.OK with Status 304,
//     no body and the new validators, at "headers": the page unchanged, for one request;
//   - follows at most render.max_redirects redirects (0: none — the first one is
//     outcome.RedirectLoop), checking each target before it is dialled: an http(s) URL, a host in
//     render.domains (else outcome.Blocked at "policy"), not a URL already visited on this render
//     (else outcome.RedirectLoop);
//   - dials only what the address policy allows (see addressGuard): an internal address that
//     render.domains does not list explicitly is refused at dial time, on the resolved address,
//     on every hop (outcome.Blocked at "policy", with an error that names the policy only);
//   - classifies the final status: 404 not_found, 410 gone, 408/425/429 and 5xx server_error
//     (retryable; Status and the retry-after header say which), other 4xx client_error, anything
//     else that is not 2xx failed — all at "headers", without reading the body;
//   - for a 2xx, reads the body up to render.max_body (gzip is decoded by the transport and the
//     limit applies to the decoded bytes), then: noindex in X-Robots-Tag → outcome.Noindex at
//     "headers"; an empty body → outcome.Failed; a robots meta noindex in an HTML head →
//     outcome.Noindex at "body"; otherwise outcome.OK. Before the noindex check, an HTML page
//     that declares its status with the prerender meta tags is stored with that status (see
//     applyDeclared): a declared 404 is outcome.NotFound, a declared 301 with its Location is
//     outcome.OK with Status 301 and Headers["location"].
//
// A noindex header is evidence on its own: such a page is outcome.Noindex even when its body is
// too large or cut short, with Body nil.
type HTTP struct {
	cfg       Options
	allow     *allowlist
	transport *http.Transport
}

// NewHTTP builds the http renderer.
func NewHTTP(cfg Options) (*HTTP, error) {
	if err := checkCommon(cfg); err != nil {
		return nil, err
	}
	if cfg.MaxRedirects < 0 {
		return nil, errors.New("render: max_redirects must not be negative")
	}
	perHost := max(cfg.Concurrency, 2)
	guard := newAddressGuard(cfg.Domains)
	t := &http.Transport{
		Proxy:                  guard.proxy,
		DialContext:            guard.dialContext(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}),
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           min(16*perHost, 1024),
		MaxIdleConnsPerHost:    perHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 256 << 10,
	}
	return &HTTP{cfg: cfg, allow: newAllowlist(cfg.Domains), transport: t}, nil
}

// CloseIdleConnections closes the renderer's idle keep-alive connections, e.g. after a reload
// replaced it.
func (h *HTTP) CloseIdleConnections() { h.transport.CloseIdleConnections() }

// phase tracks how far one hop of a render got, to name the stage an error ended it in.
type phase struct{ v atomic.Int32 }

const (
	phaseDial    = iota // resolving, connecting, TLS
	phaseRequest        // connected, writing the request
	phaseHeaders        // request written, waiting for the response
)

func (p *phase) stage() string {
	switch p.v.Load() {
	case phaseDial:
		return StageDial
	case phaseRequest:
		return StageRequest
	default:
		return StageHeaders
	}
}

// redirectError is CheckRedirect's refusal of a hop.
type redirectError struct {
	outcome outcome.Outcome
	stage   string
	msg     string
}

func (e *redirectError) Error() string { return e.msg }

// Render fetches req.URL. See HTTP for what it does and how it classifies.
func (h *HTTP) Render(ctx context.Context, req Request) (res Result) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	defer recovered(&res, start)
	res.FinalURL = req.URL

	u, err := url.Parse(req.URL)
	if err != nil {
		return failed(res, outcome.Failed, StageRequest, "bad URL: "+errText(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return failed(res, outcome.Failed, StageRequest, fmt.Sprintf("bad URL: want http(s)://host/…, got scheme %q host %q", u.Scheme, u.Host))
	}
	if !h.allow.allows(u.Host) {
		return failed(res, outcome.Blocked, StagePolicy, fmt.Sprintf("host %q is not in render.domains", u.Hostname()))
	}

	rctx, cancel := withTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	var ph phase
	rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { ph.v.CompareAndSwap(phaseDial, phaseRequest) },
		WroteRequest: func(httptrace.WroteRequestInfo) { ph.v.CompareAndSwap(phaseRequest, phaseHeaders) },
	})
	hreq, err := h.newRequest(rctx, u, req)
	if err != nil {
		return failed(res, outcome.Failed, StageRequest, "bad URL: "+errText(err))
	}

	client := &http.Client{Transport: h.transport, CheckRedirect: func(next *http.Request, via []*http.Request) error {
		ph.v.Store(phaseDial) // a new hop begins
		// The validators are the page's: a redirect's target is another resource, whose 304
		// would verify a page nobody asked about. (The client copies a hop's headers on.)
		next.Header.Del("If-None-Match")
		next.Header.Del("If-Modified-Since")
		return h.checkRedirect(next, via)
	}}
	resp, err := client.Do(hreq)
	if resp != nil {
		// On success the final response; on a refused redirect, the redirect itself (body closed).
		res.Status = resp.StatusCode
		res.FinalURL = resp.Request.URL.String()
		res.Headers = keepHeaders(resp.Header)
	}
	if err != nil {
		return h.transportFailed(rctx, res, &ph, err)
	}
	defer resp.Body.Close()
	if r, done := h.byStatus(res, resp, req.Validators != nil && resp.Request == hreq); done {
		return r
	}
	return h.readPage(rctx, res, resp)
}

// newRequest is the GET of a render: the renderer's user agent for the device, the marker
// header, and the validators of a conditional render.
func (h *HTTP) newRequest(ctx context.Context, u *url.URL, req Request) (*http.Request, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("User-Agent", userAgent(&h.cfg, req.Device))
	hreq.Header.Set(MarkerHeader, MarkerValue)
	hreq.Header.Set("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8")
	if v := req.Validators; v != nil {
		setValidators(hreq.Header, v.ETag, v.LastModified)
	}
	return hreq, nil
}

// transportFailed is the result of a request that got no page: a refused redirect, an
// address the policy forbids, the render's timeout, or a network error, each with the stage
// it reached.
func (h *HTTP) transportFailed(rctx context.Context, res Result, ph *phase, err error) Result {
	var re *redirectError
	switch {
	case errors.As(err, &re):
		res.Headers = nil // those of a 3xx, not of a page
		return failed(res, re.outcome, re.stage, re.msg)
	case errors.Is(err, ErrAddressPolicy):
		var ue *url.Error
		if errors.As(err, &ue) && ue.URL != "" {
			res.FinalURL = ue.URL
		}
		return failed(res, outcome.Blocked, StagePolicy, errText(err))
	case rctx.Err() != nil:
		return failed(res, outcome.Timeout, ph.stage(), ctxErr(rctx, h.cfg.Timeout, ph.stage()))
	default:
		var ue *url.Error
		if errors.As(err, &ue) && ue.URL != "" {
			res.FinalURL = ue.URL // the hop that failed, which may be a redirect's target
		}
		o, msg := classifyErr(err)
		return failed(res, o, ph.stage(), msg)
	}
}

// byStatus settles a render by its response's status, done=false for a 2xx whose body is
// read next. ownConditional says the request carried this render's validators and was not
// redirected, so a 304 answers it.
func (h *HTTP) byStatus(res Result, resp *http.Response, ownConditional bool) (_ Result, done bool) {
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		return res, false
	case code == http.StatusNotModified && ownConditional:
		// The answer to this render's own conditional request: the page is unchanged.
		res.Outcome, res.Stage, res.Headers = outcome.OK, StageHeaders, notModifiedHeaders(resp.Header)
		return res, true
	case code == http.StatusNotFound || code == http.StatusGone:
		o := outcome.NotFound
		if code == http.StatusGone {
			o = outcome.Gone
		}
		// The site's own page for it, if it sends one within render.max_body; a body that cannot
		// be read whole is left out, and the status stands.
		if resp.ContentLength <= h.cfg.MaxBody && isHTML(resp.Header.Get("Content-Type")) {
			if body, err := readLimited(resp.Body, h.cfg.MaxBody, resp.ContentLength); err == nil {
				res.Body = body
			}
		}
		return failed(res, o, StageHeaders, "status "+resp.Status), true
	case code == http.StatusRequestTimeout || code == http.StatusTooEarly || code == http.StatusTooManyRequests:
		return failed(res, outcome.ServerError, StageHeaders, "status "+resp.Status+" (retryable)"), true
	case code >= 400 && code <= 499:
		return failed(res, outcome.ClientError, StageHeaders, "status "+resp.Status), true
	case code >= 500 && code <= 599:
		return failed(res, outcome.ServerError, StageHeaders, "status "+resp.Status), true
	default:
		return failed(res, outcome.Failed, StageHeaders, "unexpected status "+resp.Status), true
	}
}

// readPage reads a 2xx's body within render.max_body and judges it: noindex by header or
// meta tag, a status the page declares, or a page.
func (h *HTTP) readPage(rctx context.Context, res Result, resp *http.Response) Result {
	noindexHeader := headerNoindex(resp.Header.Values("X-Robots-Tag"))
	limit := h.cfg.MaxBody
	var body []byte
	var err error
	if resp.ContentLength > limit {
		err = errTooLarge
	} else {
		body, err = readLimited(resp.Body, limit, resp.ContentLength)
	}
	switch {
	case noindexHeader:
		res.Outcome, res.Stage, res.Err = outcome.Noindex, StageHeaders, "X-Robots-Tag: noindex"
		if err == nil {
			res.Body = body
		}
		return res
	case errors.Is(err, errTooLarge):
		return failed(res, outcome.TooLarge, StageBody, fmt.Sprintf("body over render.max_body (%d bytes)", limit))
	case err != nil && rctx.Err() != nil:
		return failed(res, outcome.Timeout, StageBody, ctxErr(rctx, h.cfg.Timeout, StageBody))
	case err != nil:
		o, msg := classifyErr(err)
		return failed(res, o, StageBody, "reading body: "+msg)
	case len(body) == 0:
		return failed(res, outcome.Failed, StageBody, "empty body with status "+resp.Status)
	}
	res.Body, res.Stage = body, StageBody
	if !isHTML(resp.Header.Get("Content-Type")) {
		res.Outcome = outcome.OK
		return res
	}
	if r, ok := applyDeclared(res); ok && r.Outcome != 0 {
		return r // a declared error status, or a redirect without a Location
	} else if ok {
		res = r
	}
	if metaNoindex(body) {
		res.Outcome, res.Err = outcome.Noindex, "robots meta tag: noindex"
		return res
	}
	res.Outcome = outcome.OK
	return res
}

// RendersConditionally marks the http renderer a ConditionalRenderer: given validators, its one
// GET is the conditional check and, when the page changed, the render.
func (h *HTTP) RendersConditionally() {}

// checkRedirect vets the next hop before it is dialled.
func (h *HTTP) checkRedirect(next *http.Request, via []*http.Request) error {
	u := next.URL
	if u.Scheme != "http" && u.Scheme != "https" {
		return &redirectError{outcome.Failed, StageHeaders, fmt.Sprintf("redirect to unsupported scheme %q", u.Scheme)}
	}
	if !h.allow.allows(u.Host) {
		return &redirectError{outcome.Blocked, StagePolicy, fmt.Sprintf("redirect to host %q, which is not in render.domains", u.Hostname())}
	}
	target := withoutFragment(u)
	for _, prev := range via {
		if withoutFragment(prev.URL) == target {
			return &redirectError{outcome.RedirectLoop, StageHeaders, fmt.Sprintf("redirect loop: back to %s after %d hops", target, len(via))}
		}
	}
	if len(via) > h.cfg.MaxRedirects {
		return &redirectError{outcome.RedirectLoop, StageHeaders, fmt.Sprintf("more than render.max_redirects (%d) redirects", h.cfg.MaxRedirects)}
	}
	return nil
}

func withoutFragment(u *url.URL) string {
	v := *u
	v.Fragment, v.RawFragment = "", ""
	return v.String()
}

// failed fills in an unsuccessful result.
func failed(res Result, o outcome.Outcome, stage, msg string) Result {
	res.Outcome, res.Stage, res.Err = o, stage, msg
	if !KeepsPage(o) {
		res.Body = nil
	}
	return res
}

// KeepsPage reports whether a render that ended with o keeps the page its response carried:
// a 404 or 410, declared by the page or answered by the origin, is the site's own "not found"
// page, which a crawler must get as the site made it (the store keeps it for a page that has
// no good render to serve instead). Every other failure's body is nobody's page.
func KeepsPage(o outcome.Outcome) bool { return o == outcome.NotFound || o == outcome.Gone }

// classifyErr sorts a transport error into network trouble, a timeout of the dialer's own, TLS
// or anything else.
func classifyErr(err error) (outcome.Outcome, string) {
	msg := errText(err)
	var (
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		hostErr x509.HostnameError
		authErr x509.UnknownAuthorityError
		invErr  x509.CertificateInvalidError
		recErr  tls.RecordHeaderError
		alert   tls.AlertError
		opErr   *net.OpError
		netErr  net.Error
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &hostErr), errors.As(err, &authErr), errors.As(err, &invErr),
		errors.As(err, &recErr), errors.As(err, &alert):
		return outcome.Failed, "tls: " + msg
	case errors.As(err, &dnsErr):
		return outcome.Network, msg
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.ENETDOWN):
		return outcome.Network, msg
	case errors.Is(err, syscall.ETIMEDOUT), errors.As(err, &netErr) && netErr.Timeout():
		return outcome.Timeout, msg
	case errors.As(err, &opErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return outcome.Network, msg
	default:
		return outcome.Failed, msg
	}
}

// errText is err's message without the url.Error wrapping (`Get "…": `), which repeats the URL.
func errText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
