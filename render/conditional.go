package render

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Checker asks an origin whether a page changed since the validators it sent with the last
// full render (ETag, Last-Modified): a conditional GET of the document, under the same address
// policy and render.domains as a render, without redirects. A 304 means unchanged, verified
// now, for the price of one HTTP request instead of a render; anything else (a 200, an error)
// means render it in full. Safe for concurrent use.
type Checker struct {
	cfg    Options
	allow  *allowlist
	client *http.Client
}

// NewChecker returns a checker under cfg, which should be validated.
func NewChecker(cfg Options) *Checker {
	return &Checker{cfg: cfg, allow: newAllowlist(cfg.Domains), client: &http.Client{
		Transport:     NewTransport(cfg.Domains),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// CheckResult is what a conditional GET found.
type CheckResult struct {
	NotModified bool              // the origin answered 304
	Status      int               // its status; 0 when the request failed
	Headers     map[string]string // the 304's validators (etag, last-modified), when it sent new ones
}

// NotModified sends a conditional GET of rawURL for device with etag (If-None-Match) and
// lastModified (If-Modified-Since), whichever are set, within render.timeout. An error means
// the check could not be made (render the page in full); it is never an outcome of the page.
func (c *Checker) NotModified(ctx context.Context, rawURL, device, etag, lastModified string) (CheckResult, error) {
	if etag == "" && lastModified == "" {
		return CheckResult{}, fmt.Errorf("render: conditional check of %s: no validator", rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return CheckResult{}, fmt.Errorf("render: conditional check: bad URL %q", rawURL)
	}
	if !c.allow.allows(u.Host) {
		return CheckResult{}, fmt.Errorf("render: conditional check: host %q is not in render.domains", u.Hostname())
	}
	ctx, cancel := withTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return CheckResult{}, fmt.Errorf("render: conditional check: %w", err)
	}
	req.Header.Set("User-Agent", userAgent(&c.cfg, device))
	req.Header.Set(MarkerHeader, MarkerValue)
	req.Header.Set("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8")
	setValidators(req.Header, etag, lastModified)
	resp, err := c.client.Do(req)
	if err != nil {
		return CheckResult{}, fmt.Errorf("render: conditional check of %s: %w", rawURL, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // keep the connection for reuse if small
	res := CheckResult{NotModified: resp.StatusCode == http.StatusNotModified, Status: resp.StatusCode}
	if res.NotModified {
		res.Headers = notModifiedHeaders(resp.Header)
	}
	return res, nil
}

// setValidators makes a request conditional on the validators that are set.
func setValidators(h http.Header, etag, lastModified string) {
	if etag != "" {
		h.Set("If-None-Match", etag)
	}
	if lastModified != "" {
		h.Set("If-Modified-Since", lastModified)
	}
}

// notModifiedHeaders are what a 304 result carries: the validators the origin sent with it, so
// that the next check asks with the newest.
func notModifiedHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for _, name := range []string{"etag", "last-modified"} {
		if v := h.Get(name); v != "" {
			out[name] = v
		}
	}
	return out
}
