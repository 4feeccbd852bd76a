package render

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/html"

	"github.com/freshq/freshq/outcome"
)

// The prerender meta tags: a page declares the status a prerender cache should answer with,
// and for a redirect its Location, because a page rendered by JavaScript cannot set its own
// HTTP status:
//
//	<meta name="prerender-status-code" content="404">
//	<meta name="prerender-status-code" content="301">
//	<meta name="prerender-header" content="Location: https://example.com/new">
//
// Every renderer that reads a page honours them (http, chrome, exec). A declared status replaces
// the response's; one that is not a final status (200..599) is ignored. Of prerender-header only
// Location is taken, and only with a declared 3xx: the other headers of a stored page are the
// response's.

// declaredStatus returns the status the page's prerender-status-code meta tag declares (0 if
// none, or not 200..599) and the Location of its prerender-header tags. Script and style text is
// raw to the tokenizer, so a tag written inside a script is not read.
func declaredStatus(page []byte) (status int, location string) {
	if !bytes.Contains(bytes.ToLower(page), []byte("prerender-")) {
		return 0, "" // most pages: skip the tokenizer
	}
	z := html.NewTokenizer(bytes.NewReader(page))
	for {
		switch z.Next() {
		case html.ErrorToken:
			if status == 0 {
				location = ""
			}
			return status, location
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if string(name) != "meta" || !hasAttr {
				continue
			}
			var mname, content string
			for more := true; more; {
				var k, v []byte
				k, v, more = z.TagAttr()
				switch string(k) {
				case "name":
					mname = strings.ToLower(strings.TrimSpace(string(v)))
				case "content":
					content = strings.TrimSpace(string(v))
				}
			}
			switch mname {
			case "prerender-status-code":
				if n, err := strconv.Atoi(content); err == nil && n >= 200 && n <= 599 && status == 0 {
					status = n
				}
			case "prerender-header":
				if k, v, ok := strings.Cut(content, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "location") && location == "" {
					location = strings.TrimSpace(v)
				}
			}
		}
	}
}

// statusOutcome classifies a final status: 2xx ok (and 3xx, which only a page can declare),
// 404 not_found, 410 gone, 408/425/429 and 5xx server_error (retryable), other 4xx client_error.
func statusOutcome(code int) (outcome.Outcome, string) {
	text := fmt.Sprintf("status %d %s", code, http.StatusText(code))
	switch {
	case code >= 200 && code <= 399:
		return outcome.OK, ""
	case code == http.StatusNotFound:
		return outcome.NotFound, text
	case code == http.StatusGone:
		return outcome.Gone, text
	case code == http.StatusRequestTimeout || code == http.StatusTooEarly || code == http.StatusTooManyRequests:
		return outcome.ServerError, text + " (retryable)"
	case code >= 400 && code <= 499:
		return outcome.ClientError, text
	case code >= 500 && code <= 599:
		return outcome.ServerError, text
	}
	return outcome.Failed, "unexpected " + text
}

// applyDeclared applies the page's declared status to res, whose Body is the page and FinalURL
// its address. ok is false when the page declares nothing, and res is then unchanged. A declared
// 3xx needs a Location (resolved against FinalURL, http or https), which it stores in
// Headers["location"]; without one it is outcome.Failed.
func applyDeclared(res Result) (Result, bool) {
	status, loc := declaredStatus(res.Body)
	if status == 0 {
		return res, false
	}
	res.Status, res.Stage = status, StageBody
	o, msg := statusOutcome(status)
	if o != outcome.OK {
		return failed(res, o, StageBody, "declared by the page's prerender-status-code: "+msg), true
	}
	if status >= 300 && status <= 399 {
		target, err := resolveLocation(res.FinalURL, loc)
		if err != nil {
			return failed(res, outcome.Failed, StageBody, fmt.Sprintf("the page declares status %d but no usable prerender-header Location: %v", status, err)), true
		}
		if res.Headers == nil {
			res.Headers = map[string]string{}
		}
		res.Headers["location"] = target
	}
	return res, true
}

// CheckLocation refuses a Location that a stored redirect may not be served with: one that is
// not an absolute http(s) URL with a host, as applyDeclared resolves a page's own. The applier
// holds a remote renderer's results to it.
func CheckLocation(loc string) error {
	u, err := url.Parse(loc)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%.64q is not an absolute http(s) URL", loc)
	}
	return nil
}

func resolveLocation(base, loc string) (string, error) {
	if loc == "" {
		return "", fmt.Errorf("none")
	}
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u, err := b.Parse(loc)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("%q is not an absolute http(s) URL", loc)
	}
	return u.String(), nil
}

// JudgePage classifies a page a browser produced: res carries the navigation response's Status
// and kept Headers, FinalURL, and the captured page in Body. The page's declared status (the
// prerender meta tags) replaces the response's; then the status is classified as the http
// renderer classifies it, an empty page is outcome.Failed, and a noindex (X-Robots-Tag or a
// robots meta tag) is outcome.Noindex. The stage of a judgement is "body".
func JudgePage(res Result, robotsTag []string) Result {
	res.Stage = StageBody
	if len(res.Body) == 0 {
		return failed(res, outcome.Failed, StageBody, fmt.Sprintf("empty page with status %d", res.Status))
	}
	if r, ok := applyDeclared(res); ok {
		if r.Outcome != 0 {
			return r
		}
		res = r
	} else if o, msg := statusOutcome(res.Status); o != outcome.OK || res.Status >= 300 {
		if o == outcome.OK {
			o, msg = outcome.Failed, fmt.Sprintf("status %d without a page", res.Status)
		}
		return failed(res, o, StageBody, msg)
	}
	if headerNoindex(robotsTag) {
		res.Outcome, res.Err = outcome.Noindex, "X-Robots-Tag: noindex"
		return res
	}
	if metaNoindex(res.Body) {
		res.Outcome, res.Err = outcome.Noindex, "robots meta tag: noindex"
		return res
	}
	res.Outcome = outcome.OK
	return res
}
