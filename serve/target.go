package serve

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// MaxTargetLen bounds the URL a request names: longer is refused before it is parsed. A cache
// key holds at most store.MaxKeyLen bytes; a request line is not read past http's own limit.
const MaxTargetLen = 8 << 10

// ErrBadTarget is matched by every refusal of TargetURL: the request does not name an absolute
// http(s) URL the prerender protocol's way.
var ErrBadTarget = errors.New("serve: not a page URL")

// TargetURL returns the absolute URL a crawler-listener request names, from its request-target
// as it arrived (r.RequestURI, not r.URL.Path: Go's path cleaning would turn the URL's "//"
// into "/"). The prerender protocol's three forms are accepted:
//
//	/{url}              GET /https://shop.example/c/shoes?page=2  (prerender-node, nginx recipes)
//	/render/{url}       Rendertron's form
//	/render?url={url}   the URL as a query parameter (percent-encoded)
//
// In the first two the URL's query string is part of the URL, and the URL may arrive
// percent-encoded whole (/https%3A%2F%2Fshop.example%2Fp%3Fa%3D1, or with the ":" left as it
// is: /https:%2F%2Fshop.example%2Fp) or as written; a scheme whose
// "//" a proxy merged into "/" (https:/shop.example/) is repaired. The result is an absolute
// http or https URL with a host, at most MaxTargetLen bytes; anything else fails with an error
// matching ErrBadTarget that says why. It never panics, whatever the input (fuzzed).
func TargetURL(requestURI string) (string, error) {
	if len(requestURI) > MaxTargetLen {
		return "", bad("%d bytes, at most %d", len(requestURI), MaxTargetLen)
	}
	if !strings.HasPrefix(requestURI, "/") {
		return "", bad("the request-target must start with / (got %q)", clip(requestURI))
	}
	var raw string
	switch rest := requestURI[1:]; {
	case rest == "render" || strings.HasPrefix(rest, "render?"):
		_, query, _ := strings.Cut(rest, "?")
		q, err := url.ParseQuery(query)
		if err != nil {
			return "", bad("the query string does not parse: %v", err)
		}
		if len(q["url"]) != 1 {
			return "", bad("/render needs exactly one url parameter")
		}
		raw = q.Get("url")
	case strings.HasPrefix(rest, "render/"):
		raw = rest[len("render/"):]
	default:
		raw = rest
	}
	if encoded(raw) {
		u, err := url.PathUnescape(raw)
		if err != nil {
			return "", bad("the percent-encoded URL does not decode: %v", err)
		}
		raw = u
	}
	raw = repairScheme(raw)
	l := strings.ToLower(raw)
	if !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
		return "", bad("%q is not an absolute http(s) URL (send GET /https://your.site/path)", clip(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", bad("%q does not parse: %v", clip(raw), errors.Unwrap(err))
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", bad("%q has no host", clip(raw))
	}
	if u.User != nil {
		return "", bad("%q carries user information, which no page URL needs", clip(raw))
	}
	return raw, nil
}

// encoded reports whether raw is a URL percent-encoded whole: its scheme's ":" or its "//" is.
func encoded(raw string) bool {
	l := strings.ToLower(raw)
	for _, p := range []string{"http%3a", "https%3a", "http:%2f", "https:%2f"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// repairScheme puts back the second slash of "http:/host" or "https:/host" that a proxy's
// path cleaning took out.
func repairScheme(raw string) string {
	for _, scheme := range []string{"http:/", "https:/"} {
		if len(raw) > len(scheme) && strings.EqualFold(raw[:len(scheme)], scheme) && raw[len(scheme)] != '/' {
			return raw[:len(scheme)] + "/" + raw[len(scheme):]
		}
	}
	return raw
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadTarget, fmt.Sprintf(format, args...))
}

// clip shortens what an error quotes back.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
